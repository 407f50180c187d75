"""One training step's rollouts: generation batches of the system's workflow on the engine, until the step has its
batch (one generation batch, or dynamic sampling's refills).

Owns `Stream` (what an async schedule's rollouts implement) and `collect(parts, cfg, step) -> Rollout`: per
generation batch, this process's block of samples from the data stream (whole groups), `run_workflow` with the
workflow seed `memjax.core.seeds.rollout(seed, step, gen_batch)`, the system's shaping, the exchange of rewards and
statistics between processes (rl/shares.gather_rollouts), the reward ablation (rl/ablation.py); then
`filter_flat_groups` returns the groups with signal, without `dynamic_sampling` the batch is returned as is, with
it DynamicSampler collects groups with signal over at most `max_gen_batches` generation batches.
Invariants: statistics "_reward_sum" / "_rewards" sum every process's trajectories; "trained_samples" counts the
samples over every process; the workflow seed, the data stream and the ablation generator are the whole RNG state
of a step's rollouts.
"""

from __future__ import annotations

import dataclasses
from typing import Protocol

import jax
import numpy as np

from ..agents.workflow import run_workflow
from ..core import seeds
from ..rl.ablation import ablate
from ..rl.assemble import global_sum
from ..rl.dapo import DynamicSampler, filter_groups
from ..rl.shares import gather_rollouts


@dataclasses.dataclass
class Rollout:
    """A step's rollouts: the batch to train on (None when group filtering kept nothing), this process's traces,
    the statistics, and the data records read (for streams that number them)."""
    batch: object
    traces: list
    stats: dict
    records: list


class Stream(Protocol):
    """An async schedule's rollouts, kept between steps (`Parts.stream`; the sync schedule has none): loop/stream.py
    `RolloutStream` (colocated_async), loop/split.py `SplitStream` (split_async)."""

    shares_engine: bool  # the engine runs on the trainer's devices: it sleeps through the update, then takes weights

    def collect(self, step: int) -> Rollout:
        """Step `step + 1`'s training batch."""

    def updated(self) -> None:
        """The update of the batch taken is applied (or skipped): the policy version moves on."""

    def before_evaluation(self) -> None:
        """Leave the engine idle with the current weights (a held-out evaluation follows)."""

    def dumps(self) -> str:
        """The batches ahead of the update, for the checkpoint's meta."""

    def loads(self, text: str | None) -> None:
        """Restore `dumps()`'s state."""

    def close(self) -> None:
        """Release what the stream holds (threads)."""


def account(parts, cfg, res, stats: dict, traces: list):
    """One generation batch's WorkflowResult -> the batch to train (the system's shaping, every process's rewards
    and statistics, the ablation); its rewards, statistics and this process's traces are added to `stats` and
    `traces`. Both schedules run it (the stream's batches: memjax/loop/stream.py)."""
    sysm = parts.system
    batch, rewards, rollout_stats = gather_rollouts(sysm.shape(res.batch, res.traces), res.rewards, res.stats)
    batch = ablate(batch, cfg.ablation, parts.ablation_rng)
    traces += res.traces  # this process's (process 0's: the first samples')
    stats["_reward_sum"] = stats.get("_reward_sum", 0.0) + float(np.sum(rewards))
    stats["_rewards"] = stats.get("_rewards", 0) + len(rewards)
    for k, v in rollout_stats.items():
        stats[k] = stats.get(k, 0.0) + v
    r = np.asarray(rewards, np.float64).reshape(cfg.prompts_per_step, sysm.group_size)
    stats["groups_with_signal"] = stats.get("groups_with_signal", 0.0) + float((r.std(1) > 0).mean())
    return batch


def filtered(cfg, batch, stats: dict, traces: list, records: list) -> Rollout:
    """The Rollout of one generation batch without dynamic sampling: its groups with signal under
    `filter_flat_groups` (None when none has), else the batch as is."""
    if cfg.filter_flat_groups:  # a group is whole on one process: a process-local batch filters alone
        keep = filter_groups(batch.reward, batch.sample_group)
        kept = int(global_sum([keep.sum()])[0])
        stats["trained_samples"] = kept
        return Rollout(batch.select_samples(keep) if kept else None, traces, stats, records)
    stats["trained_samples"] = int(global_sum([batch.num_samples])[0])
    return Rollout(batch, traces, stats, records)


def collect(parts, cfg, step: int) -> Rollout:
    """Step `step + 1`'s training batch under the sync schedule (module docstring)."""
    sysm, engine = parts.system, parts.engine
    sampler = DynamicSampler(cfg.prompts_per_step, cfg.max_gen_batches if cfg.dynamic_sampling else 1,
                             pad_id=getattr(parts.tok, "pad_id", 0), across_processes=jax.process_count() > 1)
    traces, stats, records = [], {}, []
    g = 0
    lo, _ = parts.block
    while True:
        samples = next(parts.data)  # this process's block [lo, hi) of the generation batch, whole groups
        records.append(getattr(parts.data, "last_records", []))
        res = run_workflow(engine, sysm.workflow(engine, parts.tok, train=True), samples,
                           group_size=sysm.group_size, seed=seeds.rollout(cfg.seed, step, g),
                           max_active=getattr(sysm, "max_active", 0), first_trajectory=lo * sysm.group_size)
        batch = account(parts, cfg, res, stats, traces)
        g += 1
        if not cfg.dynamic_sampling:
            return filtered(cfg, batch, stats, traces, records)
        if sampler.add(batch):
            kept, info = sampler.take()
            stats.update({f"dyn_{k}": float(v) for k, v in info.items()})
            stats["groups_with_signal"] /= g
            stats["trained_samples"] = int(info["num_samples"])  # over every process
            return Rollout(kept, traces, stats, records)
