"""Every host-side seed of a run, derived from the run's `seed` by one named formula each.

Owns the derivations (all plain integers; the device derives per-token keys from a request's seed and position):
- `request(seed, trajectory, k)`: the k-th engine request of trajectory `trajectory` of a workflow call;
- `engine_request(seed, rid)`: a request submitted to the engine without a seed of its own;
- `rollout(seed, step, gen_batch)`: the workflow seed of generation batch `gen_batch` of training step `step`;
- `update(seed, step)`: the trainer's mini-batch permutation of training step `step`;
- `ablation(seed)`: the reward ablation's generator (its state is checkpointed with the run).
Invariants: the constants are those every existing run was recorded with, so a resumed run draws what the
uninterrupted one drew; results depend on (seed, sample order) only, never on scheduling or batch neighbours.
"""

from __future__ import annotations

import numpy as np

MODULUS = 2**31 - 1  # engine seeds are int32 on the device
_RUN, _TRAJECTORY, _GEN_BATCH, _UPDATE, _ABLATION = 1_000_003, 10_007, 100_003, 7919, 99


def request(seed: int, trajectory: int, k: int) -> int:
    """The sampling seed of the k-th request of a trajectory (trajectories numbered sample-major)."""
    return (seed * _RUN + trajectory * _TRAJECTORY + k) % MODULUS


def engine_request(seed: int, rid: int) -> int:
    """The sampling seed of engine request `rid` submitted without `SamplingParams.seed`."""
    return (seed * _RUN + rid) % MODULUS


def rollout(seed: int, step: int, gen_batch: int) -> int:
    """The workflow seed of generation batch `gen_batch` of training step `step` (0-based)."""
    return seed * _RUN + step + _GEN_BATCH * gen_batch


def update(seed: int, step: int) -> int:
    """The trainer's mini-batch permutation seed at training step `step` (0-based: the step being trained)."""
    return seed * _UPDATE + step


def ablation(seed: int) -> np.random.Generator:
    """The reward ablation's permutation generator of a run."""
    return np.random.default_rng([seed, _ABLATION])
