"""What a finished training run leaves in out_dir: the policy as a Hugging Face checkpoint (hf/), result.json,
reward_curve.png, report.html, and the console lines that name them.

Owns `Results`, a part of memjax.train's `Run`:
- `result(seconds)`: result.json's dict -- config, system, the evaluations before / after / on the way, the
  per-step history, seconds, the curriculum's bests, code digest, the model run, the first and last evaluations'
  traces, the held-out samples (the last evaluation's), the warm start's info (without its history).
- `_write_results(t_start)`: hf/ (gathered to process 0), `self.summary` (result() with the seconds since
  `t_start`, counted after hf/ is written, merged with what an extended run's previous result.json held:
  memjax/run_identity.py), result.json (atomically) and the reward curve (when there is anything to draw) by
  process 0.
- `_print_outputs()`: the line naming metrics, TensorBoard, checkpoints and policy, then report.html, written
  and named by process 0.
Invariants: only process 0 writes result.json, reward_curve.png and report.html; nothing here runs before the
last checkpoint is committed (run() calls `ckpts.finish()` first). Reads: cfg, system, out, primary, con, model,
evals, history, curriculum, code, model_run, _eval_extra; writes: summary.
"""

from __future__ import annotations

import dataclasses
import json
import time

from .. import run_identity
from ..checkpoint.export import export_hf
from ..report import write_report
from ..runio import write_atomic


class Results:
    """The finished run's outputs (module docstring)."""

    def result(self, seconds: float) -> dict:
        """The run's summary (result.json): config, evaluations before/after and on the way, per-step history."""
        first, last = (self.evals[0], self.evals[-1]) if self.evals else ({}, {})
        out = {"config": dataclasses.asdict(self.cfg), "system": self.system.name, "before": first, "after": last,
               "evals": self.evals, "history": self.history, "seconds": seconds,
               "stage_best": self.curriculum.summary(), "code": self.code, "model_run": self.model_run}
        for when, row in (("before", first), ("after", last)):
            extra = self._eval_extra.get(row.get("step", -1), {})
            out[f"traces_{when}"] = extra.get("traces", [])
            if when == "after" or "heldout" not in out:
                out["heldout"] = extra.get("samples", out.get("heldout", []))
        if hasattr(self.system, "warmstart_info"):
            out["warmstart"] = {k: v for k, v in self.system.warmstart_info.items() if k != "history"}
        return out

    def _write_results(self, t_start: float) -> None:
        export_hf(self.model, self.out / "hf", tokenizer=self.tok, run=self.result(0.0))  # servable dir; process 0 writes
        result = self.summary = run_identity.keep_previous(self.result(time.perf_counter() - t_start),
                                                           run_identity.recorded_result(self.out))
        if self.primary:
            write_atomic(self.out / "result.json", json.dumps(result, indent=1, default=str) + "\n")
        if self.primary and (result["evals"] or result["history"]):
            from ..report.run_summary import plot

            result["plot"] = str(plot(result, self.out / "reward_curve.png"))

    def _print_outputs(self) -> None:
        self.con.print(f"metrics: {self.out / 'metrics.jsonl'}  tensorboard: {self.out / 'tb'}  "
                       f"checkpoints: {self.out / 'checkpoints'}  policy (HF): {self.out / 'hf'}")
        if self.primary:  # one writer: the other processes' consoles are quiet and their out_dir is the same
            self.con.print(f"report: {self.trackers.artifact(write_report(self.out))}")
        self.trackers.close()  # the tracked runs end with the report as their artifact
