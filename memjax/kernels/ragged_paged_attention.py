"""Ragged paged attention: packed token rows of many sequences, each sequence's context read once per block of its
rows (the mixed schedule's attention on a GPU; memjax/engine/mixed.py).

Owns `ragged_paged_attention(q, k_pages, v_pages, layer, page_table, row_start, take, start, *, impl, block_q,
interpret)`:
q [N, H, D] packed rows; sequence s < B owns rows [row_start[s], row_start[s] + take[s]) (contiguous, in position
order) at positions start[s] + i; its keys are the positions < start[s] + take[s] of its pages page_table[s]
(this round's K/V already written); each row sees its causal prefix. Rows owned by no sequence return zeros.
Returns [N, H, D] in q's dtype. k_pages / v_pages [L, KV, P, S, D] as `paged_attention` (a float8 pool is read
the same way); nothing is donated.

How. The rows are re-blocked: each sequence's run is cut into blocks of bt = block_q // G tokens (G = H / KV query
heads per kv head, so a block is bt * G <= block_q kernel rows), the blocks of all sequences are laid out one
after another (NB = ceil(N / bt) + B blocks at most: a static shape), and every block becomes one "sequence" of
the existing paged-attention kernel (memjax/kernels/paged_attention.py) with its owner's page table and kv_len and
its rows' positions (padding rows: position -1, no visible key). So a prefill chunk of c tokens over n cached
pages reads those pages ceil(c / bt) times (once per block, as the split schedule's prefill round does), where
the per-row layout (each row its own t = 1 sequence) read them c times; a decode token is a block of its own
(G rows, as the decode kernel pads them). Gathers of q rows into blocks and the scatter of the outputs back are
[N, H, D]-sized (no pool-sized copy). impl="reference" runs the same blocks through the pure-JAX reference
(`paged_attention_ref`), the specification the kernel is tested against; both equal the per-row reference.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from .paged_attention import _MIN_ROWS, _Cfg, _on_gpu, _pallas_rows, pallas_supported
from .reference import paged_attention_ref

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
    _, kvh, _, s, _ = k_pages.shape
    b = page_table.shape[0]
    if hq % kvh or k_pages.shape[-1] != d or v_pages.shape != k_pages.shape:
        raise ValueError(f"ragged_paged_attention: q {q.shape} and pools {k_pages.shape} / {v_pages.shape} disagree "
                         "(H a multiple of KV, the same D, K and V alike)")
    if not (row_start.shape == take.shape == start.shape == (b,)):
        raise ValueError(f"ragged_paged_attention: row_start, take and start must be [B={b}] like page_table's rows, "
                         f"got {row_start.shape}, {take.shape}, {start.shape}")
    if impl not in ("auto", "pallas", "reference"):
        raise ValueError(f"ragged_paged_attention: impl must be 'auto', 'pallas' or 'reference', got {impl!r}")
    if impl == "auto":  # as paged_attention: the kernel on a GPU for the shapes it supports, else the reference
        impl = "pallas" if _on_gpu() and pallas_supported(s, d) else "reference"
    g = hq // kvh
    if not (isinstance(block_q, int) and block_q >= max(g, _MIN_ROWS) and block_q & (block_q - 1) == 0):
        raise ValueError(f"ragged_paged_attention: block_q must be a power of two >= max(16, G={g}), got {block_q!r}")
    bt = block_q // g
    owner, rows, q_pos, kv_len = ragged_blocks(n, row_start.astype(jnp.int32), take.astype(jnp.int32),
                                               start.astype(jnp.int32), bt)
    nb = rows.shape[0]
    pt = page_table.astype(jnp.int32)[owner]                             # [NB, MP]
    qb = jnp.take(q, jnp.minimum(rows, n - 1), axis=0)                   # [NB, bt, H, D] (padding rows: masked)
    if impl == "reference":
        out = paged_attention_ref(qb, k_pages, v_pages, layer, pt, q_pos, kv_len)
    else:
        if interpret is None:
            interpret = not _on_gpu()
        if not interpret and not pallas_supported(s, d):
            raise ValueError(f"ragged_paged_attention: the compiled kernel needs page size S={s} and head dim D={d} "
                             "to be powers of two >= 16 (use impl='reference' or interpret=True)")
        r = bt * g
        bq = max(_MIN_ROWS, pl.next_power_of_2(r))
        cd = q.dtype if jnp.dtype(k_pages.dtype).itemsize == 1 else k_pages.dtype  # a float8 pool keeps q's dtype
        q_rows = jnp.swapaxes(qb.astype(cd).reshape(nb, bt, kvh, g, d), 1, 2).reshape(nb, kvh, r, d)
        q_rows = jnp.pad(q_rows, ((0, 0), (0, 0), (0, bq - r), (0, 0)))
        qpos_rows = jnp.pad(jnp.repeat(q_pos, g, axis=1), ((0, 0), (0, bq - r)), constant_values=-1)
        cfg = _Cfg(bq=bq, page=s, max_pages=pt.shape[1], splits=1, scale=1.0 / float(d) ** 0.5,
                   interpret=bool(interpret))
        layer_arr = jnp.reshape(jnp.asarray(layer, jnp.int32), (1,))
        o = _pallas_rows(cfg, layer_arr, kv_len, pt, qpos_rows, q_rows, k_pages, v_pages)   # [NB, KV, bq, D]
        out = jnp.swapaxes(o[:, :, :r].reshape(nb, kvh, bt, g, d), 1, 2).reshape(nb, bt, hq, d)
    vals = out.reshape(nb * bt, hq, d).astype(q.dtype)
    return jnp.zeros_like(q).at[rows.reshape(-1)].set(vals, mode="drop", unique_indices=True)
