"""Rollouts of several processes: who runs which samples, and the one exchange after a generation batch.

Owns `share(n)` (this process's contiguous block [lo, hi) of a generation batch; whole groups stay on one process
and blocks are in process order, so concatenation gives the one-process order), `gather_rollouts(batch, rewards,
stats)` (this process's own RolloutBatch, every process's rewards, the combined statistics), `local_part`,
`process_shard`, `gather_rows`, `gather_records` and `gather_states` / `own_state` (every process's data-stream
state for checkpoints, and this process's on resume; a common state resumes on any process count).
No token array leaves its process: what needs the global batch exchanges only scalars (ablations, the critic's
whitening, dynamic sampling's counts), through `allgather_ragged`; with one process every helper returns its input.
Invariants: every process calls `gather_rollouts` once per generation batch, in the same order, with the same
statistics keys; keys ending in "seconds" or "_s" take the slowest process's value, "mean_*" the mean weighted by
"trajectories", the others the sum. docs/multihost.md, "What each process does", describes the flow.
"""

from __future__ import annotations

import json

import jax
import numpy as np

from ..parallel.split import allgather_ragged, block, gather_objects
from .assemble import RowShard, all_processes
from .batch import RolloutBatch


share = block              # this process's contiguous block of a generation batch (memjax/parallel/split.py)


def gather_rollouts(batch: RolloutBatch, rewards, stats: dict):
    """(this process's batch, global per-trajectory rewards, combined stats); see the module docstring."""
    if jax.process_count() == 1:
        return batch, list(rewards), dict(stats)
    all_rewards = [float(r) for p in allgather_ragged(np.asarray(rewards, np.float32)) for r in p]
    keys = sorted(stats)
    vals = allgather_ragged(np.asarray([stats[k] for k in keys], np.float32))
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
    return batch, all_rewards, combined


def process_shard(num_samples: int) -> RowShard:
    counts = all_processes(np.asarray([num_samples], np.int64)).reshape(-1)
    first = int(counts[:jax.process_index()].sum())
    return RowShard(first + np.arange(num_samples), int(counts.sum()))


def local_part(batch: RolloutBatch) -> tuple[RolloutBatch, RowShard]:
    if "global_samples" in batch.info and jax.process_count() > 1:  # numbered by the dynamic sampler
        return batch, RowShard(batch.info["global_samples"], int(batch.info["total_samples"]))
    return batch, (RowShard.whole(batch) if jax.process_count() == 1 else process_shard(batch.num_samples))


def gather_rows(a) -> np.ndarray:
    a = np.asarray(a)
    return a if jax.process_count() == 1 else np.concatenate(allgather_ragged(a))


def gather_states(state) -> list:
    return gather_objects([json.loads(json.dumps(state, sort_keys=True, default=str))])


def own_state(meta: dict):
    states = meta.get("data_processes")
    if not states:  # a checkpoint from before per-process states
        return meta["data"]
    if len(states) == jax.process_count():
        return states[jax.process_index()]
    if all(st == states[0] for st in states):
        return states[0]
    raise ValueError(f"its data stream was read by {len(states)} processes in different states; resume it on "
                     f"{len(states)} processes")


def gather_records(per_batch: list[list[int]]) -> list[int]:
    mine = np.asarray(per_batch, np.int64).reshape(len(per_batch), -1)
    if jax.process_count() == 1:
        return mine.reshape(-1).tolist()
    every = allgather_ragged(mine)
    return [int(r) for g in range(len(per_batch)) for part in every for r in part[g]]
