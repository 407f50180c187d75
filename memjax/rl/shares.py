"""Rollouts of several processes: who runs which samples, and the one exchange after a generation batch.

Owns:
- `share(n)`: this process's contiguous block [lo, hi) of a generation batch's n samples (sizes differ by at
  most one; a process may get none). A sample and its whole group of trajectories stay on one process, and
  the blocks are in process order, so concatenating the processes' results gives the one-process order.
- `gather_rollouts(batch, rewards, stats, pad_id)`: every process's RolloutBatch (process order, padded to the
  longest row, group ids renumbered by `concat_batches`), per-trajectory rewards and summed statistics, the
  same on every process; dynamic sampling and the group filter then decide on the global batch, identically
  everywhere. The exchange is host arrays through `multihost_utils.process_allgather` (two small collectives
  per field); with one process it returns its inputs.
Invariants: every process calls `gather_rollouts` once per generation batch, in the same order; the fields
set (optional ones) and the statistics' keys are the same on every process (one workflow); statistics keys
ending in "seconds" or "_s" take the slowest process's value, "mean_*" the mean weighted by "trajectories",
the others the sum.
"""

from __future__ import annotations

import jax
import numpy as np

from .batch import FIELDS, RolloutBatch, concat_batches


def share(n: int, process: int | None = None, processes: int | None = None) -> tuple[int, int]:
    p = jax.process_index() if process is None else process
    k = jax.process_count() if processes is None else processes
    base, extra = divmod(n, k)
    lo = p * base + min(p, extra)
    return lo, lo + base + (1 if p < extra else 0)


def _allgather_ragged(a: np.ndarray) -> list[np.ndarray]:
    """Each process's array (same rank and dtype, any shape), in process order."""
    from jax.experimental import multihost_utils

    a = np.asarray(a)
    dtype = a.dtype
    if dtype == np.bool_:
        a = a.astype(np.uint8)
    shapes = np.asarray(multihost_utils.process_allgather(np.asarray(a.shape, np.int32))).reshape(-1, a.ndim)
    padded = np.zeros(tuple(shapes.max(0)), a.dtype)
    padded[tuple(slice(0, s) for s in a.shape)] = a
    every = np.asarray(multihost_utils.process_allgather(padded))
    return [every[p][tuple(slice(0, s) for s in shapes[p])].astype(dtype) for p in range(len(shapes))]


def gather_rollouts(batch: RolloutBatch, rewards, stats: dict, pad_id: int = 0):
    """(global batch, global per-trajectory rewards, combined stats); see the module docstring."""
    if jax.process_count() == 1:
        return batch, list(rewards), dict(stats)
    per_field = {}
    for k, f in FIELDS.items():
        if getattr(batch, k) is None:
            continue
        per_field[k] = _allgather_ragged(getattr(batch, k))
    n = jax.process_count()
    parts = [RolloutBatch(**{k: v[p] for k, v in per_field.items()}) for p in range(n)]
    parts = [b for b in parts if b.num_samples > 0]
    out = concat_batches(parts, pad_id=pad_id) if len(parts) > 1 else parts[0]
    all_rewards = [float(r) for p in _allgather_ragged(np.asarray(rewards, np.float32)) for r in p]
    keys = sorted(stats)
    vals = _allgather_ragged(np.asarray([stats[k] for k in keys], np.float32))
    if any(len(v) != len(keys) for v in vals):
        raise RuntimeError(f"gather_rollouts: processes report different statistics ({[len(v) for v in vals]} keys)")
    weight = [float(v[keys.index("trajectories")]) if "trajectories" in keys else 1.0 for v in vals]
    combined = {}
    for i, k in enumerate(keys):
        col = [float(v[i]) for v in vals]
        if k.endswith(("seconds", "_s")):
            combined[k] = max(col)
        elif k.startswith("mean_"):
            combined[k] = float(np.dot(col, weight) / max(sum(weight), 1e-9))
        else:
            combined[k] = sum(col)
    return out, all_rewards, combined
