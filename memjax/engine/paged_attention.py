"""Attention over a paged KV cache, in pure JAX (the reference the Pallas kernel must match).

Cache layout (GQA-native, one array per K and V for all layers):
  k_pages, v_pages: [L, KV, P, S, D]   L layers, KV heads, P pages (page 0 = null page), S = page size
  page_table:       int32 [B, MP]       page ids of each sequence's positions [j*S, (j+1)*S); 0 = none
A step processes t new tokens for each of b sequences: their K/V are first scattered into the pages at
positions start[b] + i (i < n_valid[b]; the others, and rows whose page is the null page, are dropped by
the scatter, never written: `write_kv`), then every query attends to keys at positions <= its own. Keys are visited page by page with an
online softmax (flash-decoding order), so memory is O(b * t * S) per page, never O(b * context); the
page count is bucketed (powers of two) so the loop has a static trip count (see `paged_attention`).
Each KV page is read once for all query heads of its group. Softmax statistics are in float32.
The page loop itself (`paged_attention`, the reference the Pallas kernel must match) lives in
memjax/kernels/reference.py (kernels are leaves) and is re-exported here.
"""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp

from ..kernels.reference import page_buckets, paged_attention_ref as paged_attention  # noqa: F401


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
             n_valid: jax.Array) -> jax.Array:
    """pages [L,KV,P,S,D]; new [b,t,KV,D] at positions start[b]+i for i < n_valid[b] (rows on the null
    page or past n_valid are dropped). The written (page, offset) pairs must be distinct (the engine's
    invariant: a sequence owns its unshared pages, shared pages are never written); the scatter is
    declared unique, so a duplicate would have no defined winner on a GPU."""
    b, t = new.shape[:2]
    page, off, _ = write_indices(pages.shape, page_table, start, n_valid, t)
    vals = new.reshape(b * t, *new.shape[2:]).astype(pages.dtype)  # [N, KV, D]
    return pages.at[layer, :, page, off].set(vals, mode="drop", unique_indices=True)


@dataclass(frozen=True)
class PagedAttention:
    """Attention back-end for `Qwen2.forward`: state = (k_pages, v_pages), threaded through layers.

    page_table [b, MP], start [b] (tokens already cached), n_valid [b] (new tokens this step, <= t).
    """

    page_table: jax.Array
    start: jax.Array
    n_valid: jax.Array
    attend: object = paged_attention  # swap in the Pallas kernel with the same signature

    def __call__(self, q, k, v, *, layer, state):
        k_pages, v_pages = state
        k_pages = write_kv(k_pages, layer, k, self.page_table, self.start, self.n_valid)
        v_pages = write_kv(v_pages, layer, v, self.page_table, self.start, self.n_valid)
        t = q.shape[1]
        q_pos = self.start[:, None] + jnp.arange(t, dtype=jnp.int32)[None]
        out = self.attend(q, k_pages, v_pages, layer, self.page_table, q_pos, self.start + self.n_valid)
        return out, (k_pages, v_pages)
