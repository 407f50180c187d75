"""`RunLog`: what a training run writes while it runs: metrics.jsonl, traces.jsonl and evals.jsonl, TensorBoard
events, and the console's step and evaluation lines.

Owns the three JSONL logs (written by process 0 only) and the TensorBoard writer:
- `RunLog(out, primary, console, steps, state, trackers)`: the logs cut back to the restored step (lines past it were never
  checkpointed) and metrics.jsonl filled from the state's history (a step checkpointed just before a kill may lack
  its line); TensorBoard opens lazily at the first logged value and purges events past the restored step.
- `step(metrics)`: TensorBoard and metrics.jsonl (after the step's checkpoint: a resume writes a line it lacks);
  `traces(step, traces)`; `evaluation(row)`: evals.jsonl, TensorBoard (`eval_` prefix) and one console line;
  `print_step(m)`: the step line (and the phase line when `step_s` is measured).
Every logged value also goes to the run's experiment trackers (wandb / MLflow, memjax/loop/trackers.py; the Run
opens and closes them), each evaluation row also as a table.
Invariants: only process 0 writes; numeric, non-bool values other than `step` go to TensorBoard; without
tensorboardX one console line says so and metrics.jsonl still has every metric.
"""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from ..core.outdir import JsonlLog, tb_writer
from ..rl.phases import console_line
from .run_state import RunState
from .trackers import Trackers


class RunLog:
    def __init__(self, out: Path, primary: bool, console: Console, steps: int, state: RunState, trackers: Trackers):
        self.out, self.primary, self.con, self.steps, self.trackers = out, primary, console, steps, trackers
        self.metrics = JsonlLog(out / "metrics.jsonl", primary)
        self.traces_log = JsonlLog(out / "traces.jsonl", primary)
        self.evals = JsonlLog(out / "evals.jsonl", primary)
        for log in (self.metrics, self.traces_log, self.evals):  # lines past the restored step were never
            log.truncate(state.step)                              # checkpointed
        self.metrics.fill(state.history)  # a step checkpointed just before a kill may lack its line
        self._start_step = state.step
        self._tb = None  # opened on the first logged value, closed by close()

    def step(self, metrics: dict) -> None:
        self.tensorboard(metrics, metrics["step"])
        self.metrics.write(metrics)

    def traces(self, step: int, traces: list[dict]) -> None:
        self.traces_log.write(*({"step": step, **t} for t in traces))

    def evaluation(self, row: dict) -> None:
        step = row["step"]
        self.evals.write(row)
        self.trackers.log_evaluation(row, step)
        self.tensorboard({f"eval_{k}": v for k, v in row.items() if k != "step"}, step)
        self.con.print("held-out at step " + str(step) + ": " + "  ".join(
            f"{k} {v:.3f}" for k, v in row.items() if k != "step" and isinstance(v, (int, float))))

    def tensorboard(self, metrics: dict, step: int) -> None:
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

    def print_step(self, m: dict) -> None:
        extra = "".join(f"  {k} {m[k]:.3g}" for k in ("value_loss", "explained_variance") if m.get(k) is not None)
        self.con.print(f"step {m['step']}/{self.steps}  reward {m['reward']:.3f}  "
                       f"rollout {m['rollout_s']:.1f}s  update {m['update_s']:.1f}s  "
                       f"mismatch {m.get('logp_mismatch_mean') or float('nan'):.2e}  grad {m.get('grad_norm') or 0:.3g}"
                       + extra)
        if "step_s" in m:
            self.con.print(console_line(m), markup=False, highlight=False)

    def close(self) -> None:
        if self._tb:  # False: no tensorboardX (the GPU image)
            self._tb.close()
        self._tb = None
