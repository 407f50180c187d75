"""A SIGTERM during a training run's held-out evaluation (docs/reliability.md, the fault matrix's row for it): the
run stops within 30 s with exit 143 and its one line, records no partial evaluation, and the same command run again
runs that evaluation and finishes with the uninterrupted run's evaluations, result.json and final parameters.

The tiny config, 2 steps, a held-out evaluation every step (256 questions, greedy and 4 samples each: seconds on
CPU); the signal goes once traces.jsonl holds step 1's traces, which the run writes just before step 1's evaluation.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.child_env import PYTHONPATH as CHILD_PYTHONPATH

pytestmark = [pytest.mark.e2e, pytest.mark.slow(seconds=120), pytest.mark.timeout(900)]

ROOT = Path(__file__).resolve().parents[3]
TRAIN = [sys.executable, "-m", "memjax.train", "configs/tiny.py", "--set", "steps=2", "--set", "prompts_per_step=2",
         "--set", "agent.group_size=4", "--set", "update.micro_rows=32", "--set", "agent.heldout_size=256",
         "--set", "agent.eval_samples=4", "--set", "eval_every=1", "--set", "checkpoint_every=10"]
ENV = {**{k: v for k, v in os.environ.items() if not k.startswith(("JAX_COORDINATOR", "JAX_NUM_PROC", "JAX_PROCESS_ID",
                                                                     "SLURM_", "OMPI_", "MEMJAX_"))},
       "PYTHONPATH": CHILD_PYTHONPATH, "JAX_PLATFORMS": "cpu", "PYTHONUNBUFFERED": "1"}


def _train(out: Path, log: Path) -> subprocess.Popen:
    with open(log, "wb") as f:
        return subprocess.Popen([*TRAIN, "--set", f"out_dir={out}"], cwd=ROOT, env=ENV, stdout=f,
                                stderr=subprocess.STDOUT, start_new_session=True)


def _rows(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


def _evaluations(out: Path) -> dict:
    res = json.loads((out / "result.json").read_text())
    return {k: res[k] for k in ("before", "after", "evals", "stage_best", "heldout", "traces_after")}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    work = tmp_path_factory.mktemp("stop_in_eval")
    full, cut = work / "full", work / "cut"
    ref = _train(full, work / "full.txt")
    p = _train(cut, work / "cut.txt")
    t_sig, deadline = None, time.monotonic() + 600
    while p.poll() is None and time.monotonic() < deadline:
        if t_sig is None and any(r.get("step") == 1 for r in _rows(cut / "traces.jsonl")):
            p.send_signal(signal.SIGTERM)
            t_sig = time.monotonic()
        time.sleep(0.1)
    if p.poll() is None:
        os.killpg(p.pid, signal.SIGKILL)
    stopped_s = time.monotonic() - t_sig if t_sig is not None else None
    cut_code, cut_text = p.wait(), (work / "cut.txt").read_text(errors="replace")
    evals_at_stop = _rows(cut / "evals.jsonl")
    resumed = _train(cut, work / "resume.txt")
    assert ref.wait(timeout=600) == 0, (work / "full.txt").read_text()[-3000:]
    assert resumed.wait(timeout=600) == 0, (work / "resume.txt").read_text()[-3000:]
    return {"full": full, "cut": cut, "code": cut_code, "text": cut_text, "seconds": stopped_s,
            "evals_at_stop": evals_at_stop, "resume_text": (work / "resume.txt").read_text(errors="replace")}


def test_sigterm_in_evaluation_stops_within_30_s(runs):
    print(f"\nSIGTERM in step 1's held-out evaluation: exit {runs['code']} after {runs['seconds']:.1f} s")
    assert runs["seconds"] is not None and runs["code"] == 143, runs["text"][-3000:]
    assert runs["seconds"] < 30, runs["text"][-3000:]
    lines = [ln for ln in runs["text"].splitlines() if ln.startswith("memjax.train: ")]
    assert len(lines) == 1 and re.match(r"memjax\.train: stopped by SIGTERM at step 1, in its held-out evaluation "
                                        r"\(discarded: the resume runs it again\); checkpoint 1 committed in .*"
                                        r"run the same command again to resume from it$", lines[0]), lines
    assert "Traceback" not in runs["text"]
    # no partial evaluation recorded: only step 0's row; step 1's checkpoint holds the evaluation still to do
    assert [r["step"] for r in runs["evals_at_stop"]] == [0], runs["evals_at_stop"]


def test_resume_runs_the_evaluation_and_equals_the_uninterrupted_run(runs):
    full, cut = runs["full"], runs["cut"]
    assert "resumed from" in runs["resume_text"] and "held-out at step 1:" in runs["resume_text"]
    want, got = _rows(full / "evals.jsonl"), _rows(cut / "evals.jsonl")
    print("uninterrupted:", want, "\nstopped + resumed:", got)
    assert [r["step"] for r in want] == [0, 1, 2] and got == want
    assert _evaluations(cut) == _evaluations(full)
    assert [m["step"] for m in _rows(cut / "metrics.jsonl")] == [1, 2]
    strip = ("reward", "grad_norm", "loss")
    assert [{k: m[k] for k in strip if k in m} for m in _rows(cut / "metrics.jsonl")] == \
        [{k: m[k] for k in strip if k in m} for m in _rows(full / "metrics.jsonl")]
    from safetensors.numpy import load_file

    a, b = load_file(full / "hf" / "model.safetensors"), load_file(cut / "hf" / "model.safetensors")
    assert a.keys() == b.keys() and all((a[k] == b[k]).all() for k in a)
