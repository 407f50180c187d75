"""The training arrays of several processes, assembled from process-local rows (nothing gathered on one host).

Owns how the trainer turns THIS process's conversations into its slots of the global micro-batch arrays
[M, m, L] (M micro-batches of m rows of L tokens, rows sharded over the mesh's (data, fsdp) plane): `RowShard`
(which samples of the step's global batch this process holds), `local_slots`, `Slots` / `agree_slots` (the agreed
row length, micro-batch count and compiled cap of a mini-batch), `local_block`, `put_local` / `take_local`
(`jax.make_array_from_process_local_data`, no host exchange), the small host collectives `all_processes`,
`global_sum`, `global_max`, `reference_global` (what one process holding every row builds, for tests) and
`RowLayout`, shared by the policy's programs (memjax/rl/trainer.py) and the critic's (memjax/rl/critic.py).
Invariants: every process calls the collectives (`agree_slots`, `all_processes`, `global_sum`, `global_max`,
`RowLayout.plans`) at the same points with arrays of the same shape; with one process each is a no-op and the
layout is the one-process layout row for row; a process holding no rows of a mini-batch gives an all-padding
block (loss_mask 0) and still takes part in the update. docs/multihost.md describes the per-process flow.
"""

from __future__ import annotations

from dataclasses import dataclass

import jax
import numpy as np

from .packing import pack, row_length


@dataclass(frozen=True)
class RowShard:
    samples: np.ndarray  # int [S_local]: global sample index of each of this process's samples
    total: int  # samples of the step's global batch

    def __post_init__(self):
        s = np.asarray(self.samples, np.int64)
        object.__setattr__(self, "samples", s)
        if s.size and (s.min() < 0 or s.max() >= self.total or len(np.unique(s)) != s.size):
            raise ValueError(f"RowShard: sample indices must be distinct and in [0, {self.total}), got {s.tolist()}")

    @classmethod
    def whole(cls, batch) -> "RowShard":
        return cls(np.arange(batch.num_samples), batch.num_samples)


def all_processes(v) -> np.ndarray:
    """[P, *v.shape]: every process's `v` in process order (v itself with one process)."""
    v = np.asarray(v)
    if jax.process_count() == 1:
        return v[None]
    from jax.experimental import multihost_utils

    return np.asarray(multihost_utils.process_allgather(v)).reshape((jax.process_count(),) + v.shape)


def global_sum(v) -> np.ndarray:
    return all_processes(np.asarray(v, np.float64)).sum(0)


def global_max(v) -> np.ndarray:
    return all_processes(np.asarray(v, np.float64)).max(0)


def local_slots(sharding, m: int) -> tuple[int, int]:
    """(first, count): this process's rows of axis 1 of an [M, m, L] array placed with `sharding`."""
    if sharding is None:
        return 0, m
    idx = sharding.addressable_devices_indices_map((1, m, 1)).values()
    spans = sorted({(s[1].start or 0, m if s[1].stop is None else s[1].stop) for s in idx})
    first, stop = spans[0][0], spans[-1][1]
    covered = sum(b - a for a, b in spans)
    if covered != stop - first or any(b0 != a1 for (_, b0), (a1, _) in zip(spans, spans[1:])):
        raise ValueError(f"local_slots: this process's rows {spans} of the {m} rows of a micro-batch are not one "
                         "contiguous block (devices must be ordered by process)")
    return first, stop - first


@dataclass(frozen=True)
class Slots:
    row_len: int
    n_micro: int
    cap: int


def _pow2(n: int) -> int:
    return 1 << max(n - 1, 0).bit_length()


def agree_slots(row_lens: list[int], local_rows: list[int], m_local: int, min_micro: int) -> list[Slots]:
    """Slots of every mini-batch of an update: `row_lens` (already agreed: from the global longest
    conversation, `global_max`) and n_micro = the most micro-batches any process's packed rows
    (`local_rows`, this process's per mini-batch) need; one all-gather."""
    need = global_max(np.asarray([-(-r // m_local) for r in local_rows], np.float64)).astype(np.int64)
    return [Slots(int(L), int(n), max(_pow2(int(n)), _pow2(min_micro))) for L, n in zip(row_lens, need)]


def local_block(packing, x: np.ndarray, slots: Slots, m_local: int, pad=0) -> np.ndarray:
    """[N_local, T] per-conversation array -> this process's block [cap, m_local, row_len]."""
    return packing.tokens(np.asarray(x), pad, slots.cap * m_local).reshape(slots.cap, m_local, slots.row_len)


def put_local(block: np.ndarray, sharding, m: int):
    """The global [cap, m, L] array whose rows [first, first + m_local) of every micro-batch are this
    process's `block` (jax.make_array_from_process_local_data); with no sharding, the block itself."""
    import jax.numpy as jnp

    if sharding is None:
        return jnp.asarray(block)
    return jax.make_array_from_process_local_data(sharding, block, (block.shape[0], m, block.shape[2]))


def take_local(x) -> np.ndarray:
    """This process's contiguous block of axis 1 of a global [M, m, L] array, from its addressable shards."""
    if getattr(x, "is_fully_addressable", True):
        return np.asarray(x)
    parts = {}
    for s in x.addressable_shards:
        start = s.index[1].start or 0
        if start not in parts:  # replicas (tensor axis) hold the same rows
            parts[start] = np.asarray(s.data)
    return np.concatenate([parts[k] for k in sorted(parts)], axis=1)


def reference_global(blocks: list[np.ndarray]) -> np.ndarray:
    """The array a single process would build from every process's blocks (process order along rows)."""
    return np.concatenate(blocks, axis=1)


class RowLayout:
    """This process's conversations laid into its slots of the global micro-batch arrays of one program
    (`update`: an UpdateConfig whose micro_rows is already a multiple of the mesh's rows; `data_sharding`: the
    program's row sharding, None without a mesh). See the module docstring."""

    def __init__(self, update, data_sharding):
        self.update, self.sharding = update, data_sharding
        self.first, self.m_local = local_slots(data_sharding, update.micro_rows)

    def plans(self, lengths, parts: list[np.ndarray]) -> list:
        u = self.update
        lengths = np.asarray(lengths)
        mine = np.asarray([[r.size, lengths[r].max() if r.size else 0] for r in parts], np.float64).reshape(-1, 2)
        every = all_processes(mine)
        rows_in_all, longest = every[..., 0].sum(0), every[..., 1].max(0)
        row_lens = [row_length(max(int(n), 1), u.row_buckets, u.pad_tokens) for n in longest]
        packs = [pack(lengths[r], L, u.max_segments, u.pack) for r, L in zip(parts, row_lens)]
        slots = agree_slots(row_lens, [p.num_rows for p in packs], self.m_local, u.min_micro_batches)
        return [(r, p, sl) if n > 0 else None for r, p, sl, n in zip(parts, packs, slots, rows_in_all)]

    def build(self, plan, fields: dict[str, np.ndarray], *, step_level: bool = False) -> dict:
        """{name: [N, T] array of this process's batch} -> the global arrays of the plan's rows, plus positions,
        segment ids and (step_level) each conversation's index within its micro-batch, unique over processes."""
        rows, p, sl = plan
        m, u = self.m_local, self.update
        n = sl.cap * m
        put = lambda x: put_local(x.reshape(sl.cap, m, sl.row_len), self.sharding, u.micro_rows)
        out = {"positions": put(p.positions(n)), "segment_ids": put(p.segment_ids(n))}
        if step_level:
            local = p.local_index(m, n)
            segs = u.max_segments if u.pack else 1
            out["local"] = put(np.where(local >= 0, local + self.first * segs, -1).astype(np.int32))
        for k, v in fields.items():
            out[k] = put(p.tokens(np.asarray(v)[rows], 0, n))
        return out
