"""Attention over a paged KV cache, in pure JAX (the reference the Pallas kernel must match).

Cache layout (GQA-native, one array per K and V for all layers):
  k_pages, v_pages: [L, KV, P, S, D]   L layers, KV heads, P pages (page 0 = null page), S = page size
  page_table:       int32 [B, MP]       page ids of each sequence's positions [j*S, (j+1)*S); 0 = none
A step scatters its new K/V into the pages (`write_kv`: rows past n_valid or on the null page are dropped, never
written), then every query attends to keys at positions <= its own, page by page with an online softmax in
float32, each page read once for all query heads of its group. A float8 pool stores clip(x / scale, +-448);
`PagedAttention` folds k_scale into the query and v_scale into the output (docs/engine.md, "A float8 KV cache").
The page loop itself (`paged_attention`) lives in memjax/kernels/reference.py (kernels are leaves) and is
re-exported here.
"""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp

from ..kernels.decode_merged import merge_semaphores
from ..kernels.kv_store import scale_query, store_rows, to_pool  # noqa: F401  (to_pool: the engine's name for it)
from ..kernels.paged_attention import row_block
from ..kernels.reference import page_buckets, paged_attention_ref as paged_attention  # noqa: F401
from ..kernels.rope_kv import rope_kv


def write_indices(pages_shape, page_table: jax.Array, start: jax.Array, n_valid: jax.Array, t: int
                  ) -> tuple[jax.Array, jax.Array, jax.Array]:
    """(page [b*t], off [b*t], write [b*t]) of the K/V rows written by `write_kv`.

    Row i of sequence b is at position start[b] + i; it is written where i < n_valid[b] and its page is
    not the null page. Every other row gets a distinct out-of-bounds page id (P + row), so the scatter
    drops it and all its indices are distinct: XLA may then emit plain stores (`unique_indices`) instead
    of a compare-and-swap loop per element, which for 16-bit dtypes on a GPU serialised thousands of
    padding rows that all hit (null page, offset 0) (the engine's first GPU call ran for minutes)."""
    b = page_table.shape[0]
    p, s = pages_shape[2], pages_shape[3]
    pos = start[:, None] + jnp.arange(t, dtype=jnp.int32)[None]  # [b, t]
    valid = jnp.arange(t)[None] < n_valid[:, None]
    page_idx = jnp.clip(pos // s, 0, page_table.shape[1] - 1)
    page = jnp.where(valid, jnp.take_along_axis(page_table, page_idx, axis=1), 0).reshape(-1)
    write = (page > 0) & valid.reshape(-1)
    drop = p + jnp.arange(b * t, dtype=jnp.int32)
    return jnp.where(write, page, drop), jnp.where(write, pos.reshape(-1) % s, 0), write


def write_kv(pages: jax.Array, layer: jax.Array, new: jax.Array, page_table: jax.Array, start: jax.Array,
             n_valid: jax.Array, scale: float = 1.0) -> jax.Array:
    """pages [L,KV,P,S,D]; new [b,t,KV,D] at positions start[b]+i for i < n_valid[b] (rows on the null
    page or past n_valid are dropped). The written (page, offset) pairs must be distinct (the engine's
    invariant: a sequence owns its unshared pages, shared pages are never written); the scatter is
    declared unique, so a duplicate would have no defined winner on a GPU."""
    b, t = new.shape[:2]
    page, off, _ = write_indices(pages.shape, page_table, start, n_valid, t)
    return store_rows(pages, layer, page, off, new.reshape(b * t, *new.shape[2:]), scale)


@dataclass(frozen=True)
class PagedAttention:
    """Attention back-end for `Qwen2.forward`: state = (k_pages, v_pages), threaded through layers.

    page_table [b, MP], start [b] (tokens already cached), n_valid [b] (new tokens this step, <= t).
    k_scale / v_scale: a float8 pool's scales (1.0 otherwise): K is stored / k_scale and q is multiplied by it
    (q . k = (q k_scale) . (k / k_scale)); V is stored / v_scale and the output multiplied by it.
    ragged: the mixed round's packed layout (t = 1, each row one token), (page_table [B, MP], row_start [B],
    take [B], start [B]) per sequence (memjax/kernels/ragged_paged_attention.py). When given and `attend` has a
    `ragged` function (engine_attend's Pallas back-end), attention reads each sequence's context once per block
    of its rows; otherwise every row attends as its own sequence (the reference: exact, and cheap on CPU).
    fuse_rope_kv (EngineConfig.kernels.fuse_rope_kv): `fused_prologue` is then True (unless ragged), and the decoder hands
    a decode step's (t = 1) raw projections to `prologue_attend`, which adds the bias, applies RoPE, writes K/V and
    lays out the query in one kernel (memjax/kernels/rope_kv.py), then attends from that layout.
    fuse_split_combine (EngineConfig.kernels.fuse_split_combine): with a back-end that has `decode_merged` (engine_attend's
    Pallas one), that attention merges its splits itself (memjax/kernels/decode_merged.py); its counters ride in
    the state: `open_state` adds them for a decode step, `close_state` drops them.
    """

    page_table: jax.Array
    start: jax.Array
    n_valid: jax.Array
    attend: object = paged_attention  # swap in the Pallas kernel with the same signature
    k_scale: float = 1.0
    v_scale: float = 1.0
    ragged: tuple | None = None
    fuse_rope_kv: bool = False
    fuse_split_combine: bool = False

    @property
    def fused_prologue(self) -> bool:
        """Whether the decoder should call `prologue_attend` for a one-token step (memjax/model/qwen2.py)."""
        return self.fuse_rope_kv and self.ragged is None

    @property
    def _merged(self):
        """The back-end's split-merging decode kernel when this step uses it, else None."""
        fn = getattr(self.attend, "decode_merged", None)
        return fn if self.fused_prologue and self.fuse_split_combine else None

    def open_state(self, k_pages, v_pages, *, decode: bool):
        """The state a forward threads through its layers: (k_pages, v_pages), plus decode_merged's zero counters
        [L, b, KV] for a decode step (t = 1) that merges its splits in the kernel."""
        if decode and self._merged is not None:
            return k_pages, v_pages, merge_semaphores(k_pages, self.page_table.shape[0])
        return k_pages, v_pages

    @staticmethod
    def close_state(state):
        """(k_pages, v_pages) of a forward's final state."""
        return state[0], state[1]

    def prologue_attend(self, srcs, cols, bias, cos, sin, *, num_heads: int, layer, state):
        """One decode step from the projections' raw outputs: srcs (q, k, v sources [b, n]), cols, bias (None or
        three vectors) and cos / sin [b, D] as `rope_kv` takes them -> (out [b, 1, H, D] in srcs' dtype, state)."""
        k_pages, v_pages, *sem = state
        b, kvh, d = srcs[0].shape[0], k_pages.shape[1], k_pages.shape[-1]
        g = num_heads // kvh
        page, off, _ = write_indices(k_pages.shape, self.page_table, self.start, self.n_valid, 1)
        rows = row_block(g, getattr(self.attend, "block_q", 64))
        q_rows, k_pages, v_pages = rope_kv(*srcs, cols, bias, cos, sin, k_pages, v_pages, layer, page, off,
                                           num_heads=num_heads, rows=rows, k_scale=self.k_scale, v_scale=self.v_scale,
                                           interpret=getattr(self.attend, "interpret", None))
        q_pos, kv_len = self.start[:, None], self.start + self.n_valid
        from_rows = getattr(self.attend, "decode_rows", None)
        if sem and self._merged is not None:
            out, sem[0] = self._merged(q_rows, k_pages, v_pages, layer, self.page_table, q_pos, kv_len, sem[0],
                                       num_heads=num_heads)
        elif from_rows is not None:
            out = from_rows(q_rows, k_pages, v_pages, layer, self.page_table, q_pos, kv_len, num_heads=num_heads)
        else:  # any other back-end takes [b, 1, H, D] (k_scale is already in the query)
            q = q_rows[:, :, :g].reshape(b, 1, num_heads, d)
            out = self.attend(q, k_pages, v_pages, layer, self.page_table, q_pos, kv_len)
        if self.v_scale != 1.0:
            out = out.astype(jnp.float32) * self.v_scale
        return out.astype(srcs[0].dtype), (k_pages, v_pages, *sem)

    def __call__(self, q, k, v, *, layer, state):
        k_pages, v_pages, *rest = state
        k_pages = write_kv(k_pages, layer, k, self.page_table, self.start, self.n_valid, self.k_scale)
        v_pages = write_kv(v_pages, layer, v, self.page_table, self.start, self.n_valid, self.v_scale)
        t = q.shape[1]
        q_pos = self.start[:, None] + jnp.arange(t, dtype=jnp.int32)[None]
        q = scale_query(q, self.k_scale)
        ragged_attend = getattr(self.attend, "ragged", None)
        if self.ragged is not None and ragged_attend is not None:
            if t != 1:
                raise ValueError(f"PagedAttention: a ragged layout has one token per row, got t={t}")
            out = ragged_attend(q[:, 0], k_pages, v_pages, layer, *self.ragged)[:, None]
        else:
            out = self.attend(q, k_pages, v_pages, layer, self.page_table, q_pos, self.start + self.n_valid)
        if self.v_scale != 1.0:
            out = (out.astype(jnp.float32) * self.v_scale).astype(out.dtype)
        return out, (k_pages, v_pages, *rest)
