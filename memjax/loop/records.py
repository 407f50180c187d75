"""What a training run records while it runs: metrics.jsonl, traces.jsonl and evals.jsonl, TensorBoard events,
the held-out evaluations, and the console's step lines.

Owns `Records`, a part of memjax.train's `Run`:
- `_open_logs()`: the three JSONL logs (written by process 0 only), cut back to the restored step (lines past it
  were never checkpointed) and metrics.jsonl filled from the history (a step checkpointed just before a kill may
  lack its line); TensorBoard opens lazily at the first logged value and purges events past the restored step.
- `evaluate()`: System.evaluate on the current weights; its scalars become a row of `evals` / evals.jsonl /
  TensorBoard (`eval_` prefix) and one console line, its traces and samples are kept by step for the checkpoint and
  result.json. Returns the row ({} when the system has no held-out evaluation).
- `_tensorboard(metrics, step)`: the numeric, non-bool values but `step` (process 0; without tensorboardX one
  console line and none after); `_print(m)`: the step line (and the phase line when `step_s` is measured).
Reads: cfg, out, primary, con, system, engine, tok, step, history; writes: evals, _eval_extra, the logs, _tb,
_start_step.
"""

from __future__ import annotations

from ..rl.phases import console_line
from ..runio import JsonlLog, tb_writer
from .trackers import Trackers


def _scalars(ev: dict) -> dict:
    return {k: v for k, v in ev.items() if k not in ("traces", "samples")}


class Records:
    """The run's logs, evaluations and console lines (module docstring)."""

    def _open_logs(self) -> None:
        self.metrics_log = JsonlLog(self.out / "metrics.jsonl", self.primary)
        self.traces_log = JsonlLog(self.out / "traces.jsonl", self.primary)
        self.evals_log = JsonlLog(self.out / "evals.jsonl", self.primary)
        for log in (self.metrics_log, self.traces_log, self.evals_log):  # lines past the restored step were never
            log.truncate(self.step)                                       # checkpointed
        self.metrics_log.fill(self.history)  # a step checkpointed just before a kill may lack its line
        self._start_step = self.step
        self._tb = None  # TensorBoard writer, opened on the first step and closed at the end of run()
        self.trackers = Trackers.open(self.cfg, self.out, self.primary, self.code)  # wandb / MLflow (cfg.loggers)

    def evaluate(self) -> dict:
        """Held-out evaluation of the current weights (System.evaluate), logged at the current step."""
        ev = self.system.evaluate(self.engine, self.tok)
        if not ev:
            return {}
        row = {"step": self.step, **_scalars(ev)}
        self._eval_extra[self.step] = {k: ev[k] for k in ("traces", "samples") if k in ev}
        self.evals.append(row)
        self.evals_log.write(row)
        self.trackers.log_evaluation(row, self.step)
        self._tensorboard({f"eval_{k}": v for k, v in row.items() if k != "step"}, self.step)
        self.con.print("held-out at step " + str(self.step) + ": " + "  ".join(
            f"{k} {v:.3f}" for k, v in row.items() if k != "step" and isinstance(v, (int, float))))
        return row

    def _tensorboard(self, metrics: dict, step: int) -> None:
        if not self.primary:
            return
        self.trackers.log(metrics, step)
        if self._tb is None:  # opened at the first logged step; purges what a killed run logged past the restored step
            try:
                self._tb = tb_writer(self.out / "tb", resumed_step=self._start_step)
            except ImportError as e:  # the GPU image has no tensorboardX: metrics.jsonl and the report still have all
                self._tb = False
                self.con.print(f"no TensorBoard events ({e}); metrics.jsonl has every metric", markup=False)
        if self._tb is False:
            return
        for k, v in metrics.items():
            if isinstance(v, (int, float)) and not isinstance(v, bool) and k != "step":
                self._tb.add_scalar(k, v, step)

    def _print(self, m: dict) -> None:
        extra = "".join(f"  {k} {m[k]:.3g}" for k in ("value_loss", "explained_variance") if m.get(k) is not None)
        self.con.print(f"step {m['step']}/{self.cfg.steps}  reward {m['reward']:.3f}  "
                       f"rollout {m['rollout_s']:.1f}s  update {m['update_s']:.1f}s  "
                       f"mismatch {m.get('logp_mismatch_mean') or float('nan'):.2e}  grad {m.get('grad_norm') or 0:.3g}"
                       + extra)
        if "step_s" in m:
            self.con.print(console_line(m), markup=False, highlight=False)
