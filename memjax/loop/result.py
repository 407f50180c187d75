"""What a finished training run leaves in out_dir: the policy as a Hugging Face checkpoint (hf/), result.json,
reward_curve.png, report.html, and the console lines that name them.

Owns `summary(...)` (result.json's dict: config, system, evaluations, per-step history, seconds, the curriculum's
bests, code digest, environment, traces, held-out samples, the warm start's info), `write(out, primary, model,
tokenizer, make_summary)` (hf/ as a servable directory, memjax/checkpoint/export.py; result.json written atomically
and merged with an extended run's previous one, memjax/run/identity.py; the reward curve) and `announce(...)` (the
line naming metrics, TensorBoard, checkpoints and policy, then report.html, also handed to the experiment trackers).
Invariants: only process 0 writes result.json, reward_curve.png and report.html; nothing here runs before the last
checkpoint is committed (the Run finishes its checkpointer first).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path

from rich.console import Console

from ..checkpoint.export import export_hf
from ..core.outdir import write_atomic
from ..report import write_report
from ..run import identity as run_identity
from .run_state import RunState
from .trackers import Trackers


def summary(cfg, system, state: RunState, curriculum, code: str, model_run: dict, seconds: float,
            environment: dict | None = None) -> dict:
    """The run's summary (result.json): config, evaluations before/after and on the way, per-step history, and the
    environment of the process that finished it."""
    first, last = (state.evals[0], state.evals[-1]) if state.evals else ({}, {})
    out = {"config": dataclasses.asdict(cfg), "system": system.name, "before": first, "after": last,
           "evals": state.evals, "history": state.history, "seconds": seconds,
           "stage_best": curriculum.summary(), "code": code, "model_run": model_run, "environment": environment}
    for when, row in (("before", first), ("after", last)):
        extra = state.eval_extra.get(row.get("step", -1), {})
        out[f"traces_{when}"] = extra.get("traces", [])
        if when == "after" or "heldout" not in out:
            out["heldout"] = extra.get("samples", out.get("heldout", []))
    if hasattr(system, "warmstart_info"):
        out["warmstart"] = {k: v for k, v in system.warmstart_info.items() if k != "history"}
    return out


def write(out: Path, primary: bool, model, tokenizer, make_summary: Callable[[], dict]) -> dict:
    """hf/, result.json and the reward curve of a finished run (module docstring); returns what result.json holds.
    `make_summary` is called for the model card and again once hf/ is written (result.json's seconds count the
    export)."""
    export_hf(model, out / "hf", tokenizer=tokenizer, run=make_summary())  # gathered to process 0, which writes it
    result = run_identity.keep_previous(make_summary(), run_identity.recorded_result(out))
    if primary:
        write_atomic(out / "result.json", json.dumps(result, indent=1, default=str) + "\n")
    if primary and (result["evals"] or result["history"]):
        from ..report.run_summary import plot

        result["plot"] = str(plot(result, out / "reward_curve.png"))
    return result


def announce(out: Path, primary: bool, console: Console, trackers: Trackers) -> None:
    console.print(f"metrics: {out / 'metrics.jsonl'}  tensorboard: {out / 'tb'}  "
                  f"checkpoints: {out / 'checkpoints'}  policy (HF): {out / 'hf'}")
    if primary:  # one writer: the other processes' consoles are quiet and their out_dir is the same
        console.print(f"report: {trackers.artifact(write_report(out))}")
