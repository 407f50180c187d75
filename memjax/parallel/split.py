"""Work dealt over the processes of a run, and the small host exchange that puts the results back together.

Owns:
- `block(n)`: this process's contiguous block [lo, hi) of n items (sizes differ by at most one, in process
  order; a process may get none), so concatenating the processes' results gives the one-process order.
- `deal_groups(keys)`: a mask of the items this process runs when items sharing a key (a LoCoMo conversation:
  its memory bank is built once) must stay together: the g-th distinct key, in order of first appearance, goes
  to process g mod N.
- `allgather_ragged(a)`: every process's host array (same rank and dtype, any shape), in process order.
- `gather_objects(items)`: every process's list of picklable objects, concatenated in process order, on every
  process (one pickle per process, sent as bytes through `allgather_ragged`).
Invariants: the dealing depends only on (n or keys, process index, process count), never on timing; the
exchanges are collectives (every process calls them at the same point, also one that has no items); with one
process every helper returns its input without touching the runtime.
"""

from __future__ import annotations

import pickle
from collections.abc import Sequence

import jax
import numpy as np


def block(n: int, process: int | None = None, processes: int | None = None) -> tuple[int, int]:
    p = jax.process_index() if process is None else process
    k = jax.process_count() if processes is None else processes
    base, extra = divmod(n, k)
    lo = p * base + min(p, extra)
    return lo, lo + base + (1 if p < extra else 0)


def deal_groups(keys: Sequence, process: int | None = None, processes: int | None = None) -> list[bool]:
    p = jax.process_index() if process is None else process
    k = jax.process_count() if processes is None else processes
    order = {key: g for g, key in enumerate(dict.fromkeys(keys))}
    return [order[key] % k == p for key in keys]


def allgather_ragged(a) -> list[np.ndarray]:
    a = np.asarray(a)
    if jax.process_count() == 1:
        return [a]
    from jax.experimental import multihost_utils

    dtype = a.dtype
    if dtype == np.bool_:
        a = a.astype(np.uint8)
    shapes = np.asarray(multihost_utils.process_allgather(np.asarray(a.shape, np.int32))).reshape(-1, a.ndim)
    padded = np.zeros(tuple(shapes.max(0)), a.dtype)
    padded[tuple(slice(0, s) for s in a.shape)] = a
    every = np.asarray(multihost_utils.process_allgather(padded))
    return [every[p][tuple(slice(0, s) for s in shapes[p])].astype(dtype) for p in range(len(shapes))]


def gather_objects(items: Sequence) -> list:
    if jax.process_count() == 1:
        return list(items)
    mine = np.frombuffer(pickle.dumps(list(items), protocol=pickle.HIGHEST_PROTOCOL), np.uint8)
    return [x for part in allgather_ragged(mine) for x in pickle.loads(part.tobytes())]
