"""`run_heldout`: a held-out evaluation's workflow run, split over the processes of a run (jax.distributed).

Owns the one way every system's evaluation (System.evaluate, which `memjax.train` runs before, during and after
training, and `python -m memjax.evaluate`) runs its held-out samples on several processes: process p runs its
contiguous block of the samples (memjax/parallel/split.py `block`) on its own engine, on its own devices, with
`first_trajectory` set so every request is sampled with the seed it has in a one-process run; the finished
trajectories (reward, counters and the workflow's state; no conversation is recorded) are gathered to every
process in sample order and summarised there (`summarize`: rewards, traces, the workflow's statistics).
Invariants: with one process it is run_workflow(record=False). With N processes the per-trajectory rewards,
traces and the workflow's statistics are those of the one-process run (computed from the same trajectories
in the same order); the run-level counters are combined: `seconds` is the slowest process's, the others
(trajectories, tokens, engine_* counters) are summed. Every process returns the same result, so decisions
taken from it (best checkpoint, curriculum) agree. Trajectory states must pickle (they are plain data).
`judge_heldout(judge, items)`: the verdicts of a summary's judge the same way (each process its block).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any

import jax

from ..parallel.lifecycle import HeldoutStopped, heldout_active, heldout_stop_due, heldout_stop_requested
from ..parallel.split import block, gather_objects
from .workflow import Workflow, WorkflowResult, drive, run_workflow, summarize


def run_heldout(engine, workflow: Workflow, samples: Iterable[Any], *, group_size: int = 1, seed: int = 0,
                max_active: int = 0, progress: bool | None = None, first_trajectory: int = 0) -> WorkflowResult:
    """run_workflow(..., record=False) over every sample, each process running its own block (see above).
    `first_trajectory`: the samples' first trajectory number (a run cut into batches samples each batch as the
    uncut run would). Inside a training run's held-out evaluation (memjax.parallel.lifecycle `heldout_stops`) a
    stop request ends it with `HeldoutStopped`: one process asks at every engine step, several processes before
    each batch of samples (each process's engine full), every process the same number of times."""
    samples = list(samples)
    if jax.process_count() == 1:
        stop = heldout_stop_requested if heldout_active() else None
        if stop is not None and stop():
            raise HeldoutStopped()
        return run_workflow(engine, workflow, samples, group_size=group_size, seed=seed, max_active=max_active,
                            record=False, progress=progress, first_trajectory=first_trajectory, should_stop=stop)
    if not heldout_active():
        trajs, stats = _gathered(engine, workflow, samples, group_size, seed, max_active, progress, first_trajectory)
        return summarize(workflow, trajs, stats, record=False)
    slots = max_active or getattr(getattr(engine, "config", None), "max_slots", 0) or 64
    per = max(1, slots // group_size) * jax.process_count()
    trajs, stats = [], {}
    for lo in range(0, len(samples), per):
        if heldout_stop_due():  # every process, before every batch: true at the same batch everywhere
            raise HeldoutStopped()
        ts, st = _gathered(engine, workflow, samples[lo:lo + per], group_size, seed, max_active, progress,
                           first_trajectory + lo * group_size)
        trajs += [dataclasses.replace(t, index=t.index + lo * group_size, sample=t.sample + lo) for t in ts]
        for k, v in st.items():
            stats[k] = stats.get(k, 0) + v
    return summarize(workflow, trajs, stats, record=False)


def _gathered(engine, workflow, samples: list, group_size: int, seed: int, max_active: int, progress,
              first_trajectory: int) -> tuple[list, dict[str, float]]:
    """Several processes: each drives its block of `samples`; every process gets all trajectories (sample order)
    and the combined run statistics."""
    lo, hi = block(len(samples))
    trajs, run_stats = ([], {}) if lo == hi else drive(
        engine, workflow, samples[lo:hi], group_size=group_size, seed=seed, max_active=max_active, record=False,
        progress=progress, first_trajectory=first_trajectory + lo * group_size)
    mine = [dataclasses.replace(t, index=t.index + lo * group_size, sample=t.sample + lo, turns=[]) for t in trajs]
    everyone = gather_objects([(mine, run_stats)])
    all_trajs = [t for ts, _ in everyone for t in ts]
    combined: dict[str, float] = {}
    for _, st in everyone:
        for k, v in st.items():
            combined[k] = max(combined.get(k, v), v) if k == "seconds" else combined.get(k, 0) + v
    for k in ("seconds", "trajectories", "conversations", "prompt_tokens", "generated_tokens"):
        combined.setdefault(k, 0)
    return all_trajs, combined


def judge_heldout(judge, items: list) -> list:
    """judge.judge(items) (a held-out summary's verdicts on the gathered answers), each process judging its
    block: an LLM judge is asked each question once, not once per process, and every process gets the same
    verdicts (process order = item order)."""
    if jax.process_count() == 1:
        return list(judge.judge(items))
    lo, hi = block(len(items))
    return gather_objects(list(judge.judge(items[lo:hi])) if hi > lo else [])
