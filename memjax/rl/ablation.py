"""Reward ablations of the training loop (`TrainConfig.ablation`): the controls that cut the link between what a
trajectory did and the reward it is trained on.

Owns `ablate(batch, mode, rng)`: "none" returns `batch` itself; "shuffle_rewards" permutes the trajectory rewards
(same statistics, no link to what a trajectory did); "zero_advantages" replaces them by their mean. Systems with
per-row credit (`RolloutBatch.unit_reward`, e.g. Memory-R2) get the same on their credit units' rewards.
Invariants: `batch` is this process's block of a generation batch, and the permutation / mean is over every
process's values (one small all-gather of float32 rewards, no tokens), so several processes give the one-process
result; every process draws the same permutation from `rng` (seeded alike, saved with each checkpoint).
"""

from __future__ import annotations

import jax
import numpy as np

from ..parallel.split import allgather_ragged
from .batch import unit_index


def ablate(batch, mode: str, rng: np.random.Generator):
    """The ablation on the trajectory rewards and, for systems with per-row credit (`unit_reward`, e.g.
    Memory-R2), the same on the credit units' rewards. `batch` is this process's block of a generation batch;
    the permutation / mean is over every process's values (`_ablated`), as one process holding the whole
    generation batch has it."""
    if mode == "none":
        return batch
    out = batch.replace(reward=_ablated(batch.reward, mode, rng))
    if batch.unit_reward is not None:
        first, inv = unit_index(batch)  # units in (sample, unit) order: process order concatenates them
        out = out.replace(unit_reward=_ablated(batch.unit_reward[first], mode, rng)[inv])
    return out


def _ablated(mine: np.ndarray, mode: str, rng: np.random.Generator) -> np.ndarray:
    """This process's part of the global vector (every process's `mine` in process order: one small
    all-gather of rewards, no tokens) permuted ("shuffle_rewards": same statistics, no link to what a
    trajectory did) or replaced by its mean ("zero_advantages"). Every process draws the same permutation."""
    parts = allgather_ragged(np.asarray(mine, np.float32))
    every = np.concatenate(parts)
    lo = sum(len(p) for p in parts[:jax.process_index()])
    new = rng.permutation(every) if mode == "shuffle_rewards" else np.full_like(every, every.mean())
    return new[lo:lo + len(mine)].astype(np.float32)
