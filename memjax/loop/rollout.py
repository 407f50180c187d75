"""One training step's rollouts: generation batches of the system's workflow on the engine, until the step has
its batch (one generation batch, or dynamic sampling's refills).

Owns `rollout_seed(seed, step, gen_batch)` (the workflow seed: with the data stream and the ablation generator the
whole RNG state of a run) and `Rollouts`, a part of memjax.train's `Run` whose `rollout()` returns (the step's
RolloutBatch or None when group filtering kept nothing, this process's traces, the statistics).
Per generation batch: this process's block of samples from the data stream (whole groups), `run_workflow`, the
system's shaping, the exchange of rewards and statistics between processes (rl/shares.gather_rollouts), the
reward ablation (rl/ablation.py); then `filter_flat_groups` returns the groups with signal, without
`dynamic_sampling` the batch is returned as is, with it DynamicSampler collects groups with signal over at most
`max_gen_batches` generation batches.
Invariants: statistics "_reward_sum" / "_rewards" sum every process's trajectories; "trained_samples" counts the
samples over every process. Reads: cfg, system, tok, engine, data, step, rng, _block; writes: _records (the data
records read this step, for streams that number them).
"""

from __future__ import annotations

import jax
import numpy as np

from ..agents.workflow import run_workflow
from ..rl.ablation import ablate
from ..rl.assemble import global_sum
from ..rl.dapo import DynamicSampler, filter_groups
from ..rl.shares import gather_rollouts


def rollout_seed(seed: int, step: int, gen_batch: int) -> int:
    """The workflow seed of generation batch g of training step `step` (0-based)."""
    return seed * 1_000_003 + step + 100_003 * gen_batch


class Rollouts:
    """The rollout phase of `Run.train_step` (module docstring)."""

    def rollout(self):
        """One step's training batch: generation batches of the system's workflow (refilled by dynamic
        sampling), shaped and ablated; returns (batch or None, traces, stats)."""
        cfg, sysm = self.cfg, self.system
        sampler = DynamicSampler(cfg.prompts_per_step, cfg.max_gen_batches if cfg.dynamic_sampling else 1,
                                 pad_id=getattr(self.tok, "pad_id", 0), across_processes=jax.process_count() > 1)
        traces, stats = [], {}
        g = 0
        self._records = []  # the data records read this step (streams that number them)
        lo, hi = self._block
        while True:
            samples = next(self.data)  # this process's block [lo, hi) of the generation batch, whole groups
            self._records.append(getattr(self.data, "last_records", []))
            res = run_workflow(self.engine, sysm.workflow(self.engine, self.tok, train=True), samples,
                               group_size=sysm.group_size, seed=rollout_seed(cfg.seed, self.step, g),
                               max_active=getattr(sysm, "max_active", 0), first_trajectory=lo * sysm.group_size)
            batch, rewards, rollout_stats = gather_rollouts(sysm.shape(res.batch, res.traces), res.rewards, res.stats)
            batch = ablate(batch, cfg.ablation, self.rng)
            traces += res.traces  # this process's (process 0's: the first samples')
            stats["_reward_sum"] = stats.get("_reward_sum", 0.0) + float(np.sum(rewards))
            stats["_rewards"] = stats.get("_rewards", 0) + len(rewards)
            for k, v in rollout_stats.items():
                stats[k] = stats.get(k, 0.0) + v
            r = np.asarray(rewards, np.float64).reshape(cfg.prompts_per_step, sysm.group_size)
            stats["groups_with_signal"] = stats.get("groups_with_signal", 0.0) + float((r.std(1) > 0).mean())
            g += 1
            if cfg.filter_flat_groups:  # a group is whole on one process: a process-local batch filters alone
                keep = filter_groups(batch.reward, batch.sample_group)
                kept = int(global_sum([keep.sum()])[0])
                stats["trained_samples"] = kept
                return (batch.select_samples(keep) if kept else None), traces, stats
            if not cfg.dynamic_sampling:
                stats["trained_samples"] = int(global_sum([batch.num_samples])[0])
                return batch, traces, stats
            if sampler.add(batch):
                kept, info = sampler.take()
                stats.update({f"dyn_{k}": float(v) for k, v in info.items()})
                stats["groups_with_signal"] /= g
                stats["trained_samples"] = int(info["num_samples"])  # over every process
                return kept, traces, stats
