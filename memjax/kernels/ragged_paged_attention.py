"""Ragged paged attention: packed token rows of many sequences, each sequence's context read once per block of its
rows (the mixed schedule's attention on a GPU; memjax/engine/mixed.py).

Owns `ragged_paged_attention(q, k_pages, v_pages, layer, page_table, row_start, take, start, *, impl, block_q,
interpret)`: q [N, H, D] packed rows; sequence s owns rows [row_start[s], row_start[s] + take[s]) (contiguous, in
position order) at positions start[s] + i and attends causally to its pages (this round's K/V already written);
rows owned by no sequence return zeros. Returns [N, H, D] in q's dtype; pools as `paged_attention`.
Each sequence's run is cut into blocks of block_q // G tokens, and every block becomes one "sequence" of the paged
kernel (memjax/kernels/paged_attention.py) with its owner's page table, so a prefill chunk reads its cached pages
once per block, not once per row. The block count has a static bound (ceil(N / bt) + B); the gathers into blocks
and back are [N, H, D]-sized (no pool-sized copy). Nothing is donated.
docs/engine.md, "Ragged prefill", has the measured effect.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from .paged_attention import _MIN_ROWS, paged_attention

__all__ = ["ragged_paged_attention", "ragged_blocks"]


def ragged_blocks(n_rows: int, row_start, take, start, bt: int):
    """Block layout of the packed rows: (owner [NB], rows [NB, bt] (row index, or n_rows + k for padding: distinct
    and out of range), q_pos [NB, bt] (-1 for padding), kv_len [NB] (0 for unused blocks)), NB = ceil(n_rows / bt)
    + B, each sequence's run cut into ceil(take / bt) consecutive blocks."""
    b = take.shape[0]
    nb = -(-n_rows // bt) + b
    nblk = (take + bt - 1) // bt
    cum = jnp.cumsum(nblk)
    k = jnp.arange(nb, dtype=jnp.int32)
    owner = jnp.minimum(jnp.searchsorted(cum, k, side="right"), b - 1).astype(jnp.int32)
    used = k < cum[-1]
    j = k - (cum - nblk)[owner]
    local = j[:, None] * bt + jnp.arange(bt, dtype=jnp.int32)[None]
    ok = used[:, None] & (local < take[owner][:, None])
    pad = n_rows + jnp.arange(nb * bt, dtype=jnp.int32).reshape(nb, bt)
    rows = jnp.where(ok, row_start[owner][:, None] + local, pad)
    q_pos = jnp.where(ok, start[owner][:, None] + local, -1)
    kv_len = jnp.where(used, start[owner] + take[owner], 0)
    return owner, rows, q_pos, kv_len


def ragged_paged_attention(q: jax.Array, k_pages: jax.Array, v_pages: jax.Array, layer, page_table: jax.Array,
                           row_start: jax.Array, take: jax.Array, start: jax.Array, *, impl: str = "pallas",
                           block_q: int = 64, interpret: bool | None = None) -> jax.Array:
    """Attention of packed rows q [N, H, D] (module docstring); impl "pallas" (the kernel), "reference" or "auto"
    (the kernel on a GPU where page size and head dim allow, else the reference)."""
    if q.ndim != 3:
        raise ValueError(f"ragged_paged_attention: q must be [N, H, D], got shape {q.shape}")
    n, hq, d = q.shape
    kvh = k_pages.shape[1]
    b = page_table.shape[0]
    if hq % kvh or k_pages.shape[-1] != d or v_pages.shape != k_pages.shape:
        raise ValueError(f"ragged_paged_attention: q {q.shape} and pools {k_pages.shape} / {v_pages.shape} disagree "
                         "(H a multiple of KV, the same D, K and V alike)")
    if not (row_start.shape == take.shape == start.shape == (b,)):
        raise ValueError(f"ragged_paged_attention: row_start, take and start must be [B={b}] like page_table's rows, "
                         f"got {row_start.shape}, {take.shape}, {start.shape}")
    if impl not in ("auto", "pallas", "reference"):
        raise ValueError(f"ragged_paged_attention: impl must be 'auto', 'pallas' or 'reference', got {impl!r}")
    g = hq // kvh
    if not (isinstance(block_q, int) and block_q >= max(g, _MIN_ROWS) and block_q & (block_q - 1) == 0):
        raise ValueError(f"ragged_paged_attention: block_q must be a power of two >= max(16, G={g}), got {block_q!r}")
    bt = block_q // g
    owner, rows, q_pos, kv_len = ragged_blocks(n, row_start.astype(jnp.int32), take.astype(jnp.int32),
                                               start.astype(jnp.int32), bt)
    nb = rows.shape[0]
    pt = page_table.astype(jnp.int32)[owner]                             # [NB, MP]
    qb = jnp.take(q, jnp.minimum(rows, n - 1), axis=0)                   # [NB, bt, H, D] (padding rows: masked)
    # every block is a t = bt chunk of its own "sequence": the kernel's row layout, padding and split rules apply
    out = paged_attention(qb, k_pages, v_pages, layer, pt, q_pos, kv_len, impl=impl, num_splits=1, block_q=block_q,
                          interpret=interpret)                           # [NB, bt, H, D]
    vals = out.reshape(nb * bt, hq, d).astype(q.dtype)
    return jnp.zeros_like(q).at[rows.reshape(-1)].set(vals, mode="drop", unique_indices=True)
