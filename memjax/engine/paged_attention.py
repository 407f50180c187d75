"""Attention over a paged KV cache, in pure JAX (the reference the Pallas kernel must match).

Cache layout (GQA-native, one array per K and V for all layers):
  k_pages, v_pages: [L, KV, P, S, D]   L layers, KV heads, P pages (page 0 = null page), S = page size
  page_table:       int32 [B, MP]       page ids of each sequence's positions [j*S, (j+1)*S); 0 = none
A step processes t new tokens for each of b sequences: their K/V are first scattered into the pages at
positions start[b] + i (i < n_valid[b]; the others go to the null page, which is never read as valid),
then every query attends to keys at positions <= its own. Keys are visited page by page with an
online softmax (flash-decoding order), so memory is O(b * t * S) per page, never O(b * context); the
page count is bucketed (powers of two) so the loop has a static trip count (see `paged_attention`).
Each KV page is read once for all query heads of its group. Softmax statistics are in float32.
"""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp
from einops import rearrange


def write_kv(pages: jax.Array, layer: jax.Array, new: jax.Array, page_table: jax.Array, start: jax.Array,
             n_valid: jax.Array) -> jax.Array:
    """pages [L,KV,P,S,D]; new [b,t,KV,D] at positions start[b]+i for i < n_valid[b]."""
    b, t = new.shape[:2]
    s = pages.shape[3]
    pos = start[:, None] + jnp.arange(t, dtype=jnp.int32)[None]  # [b, t]
    valid = jnp.arange(t)[None] < n_valid[:, None]
    page_idx = jnp.clip(pos // s, 0, page_table.shape[1] - 1)
    page = jnp.where(valid, jnp.take_along_axis(page_table, page_idx, axis=1), 0)
    off = jnp.where(valid, pos % s, 0)
    vals = new.reshape(b * t, *new.shape[2:]).astype(pages.dtype)  # [N, KV, D]
    return pages.at[layer, :, page.reshape(-1), off.reshape(-1)].set(vals)


def page_buckets(max_pages: int) -> tuple[int, ...]:
    """Static page-loop lengths: powers of two below max_pages, then max_pages."""
    sizes, n = [], 1
    while n < max_pages:
        sizes.append(n)
        n *= 2
    return (*sizes, max_pages)


def paged_attention(q: jax.Array, k_pages: jax.Array, v_pages: jax.Array, layer: jax.Array,
                    page_table: jax.Array, q_pos: jax.Array, kv_len: jax.Array, *, dynamic: bool = False
                    ) -> jax.Array:
    """q [b,t,H,D] at absolute positions q_pos [b,t]; keys of sequence i are positions < kv_len[i].

    Returns [b,t,H,D] in q's dtype. Query rows with no visible key (padding) return zeros.
    Pages visited: n = ceil(max(kv_len) / S) rounded up to a bucket of `page_buckets(MP)`, chosen by one
    `lax.switch` per call; inside, the page loop has a static trip count (no per-page predicate). The
    extra pages are fully masked, which leaves (m, l, acc) exactly unchanged (max with -inf, exp(-inf) = 0,
    correction exp(0) = 1), so the result is bit-identical to `dynamic=True` (a while loop of exactly n).
    """
    b, t, h, d = q.shape
    kv, s = k_pages.shape[1], k_pages.shape[3]
    qg = rearrange(q, "b t (kv g) d -> b kv g t d", kv=kv).astype(jnp.float32) / jnp.sqrt(jnp.float32(d))
    n_pages = (jnp.max(kv_len) + s - 1) // s
    layer = jnp.asarray(layer, jnp.int32)  # an array index, so [layer, :, ids] is one gather

    def body(j, carry):
        m, l, acc = carry
        ids = page_table[:, j]  # [b]
        # One gather of b pages. Never k_pages[layer][:, ids]: XLA hoists k_pages[layer] out of the loop
        # and copies that layer's whole [KV, P, S, D] pool every layer of every step.
        kp = k_pages[layer, :, ids].astype(jnp.float32)  # [b, KV, S, D] (advanced dims first)
        vp = v_pages[layer, :, ids].astype(jnp.float32)
        sc = jnp.einsum("bkgtd,bksd->bkgts", qg, kp)
        key_pos = j * s + jnp.arange(s, dtype=jnp.int32)
        ok = (key_pos[None, None, :] <= q_pos[:, :, None]) & (key_pos[None, None, :] < kv_len[:, None, None])
        sc = jnp.where(ok[:, None, None], sc, -jnp.inf)
        m_new = jnp.maximum(m, sc.max(-1))
        m_safe = jnp.where(jnp.isfinite(m_new), m_new, 0.0)
        p = jnp.exp(sc - m_safe[..., None])
        corr = jnp.exp(jnp.where(jnp.isfinite(m), m, m_safe) - m_safe)
        l = l * corr + p.sum(-1)
        acc = acc * corr[..., None] + jnp.einsum("bkgts,bksd->bkgtd", p, vp)
        return m_new, l, acc

    g = h // kv
    init = (jnp.full((b, kv, g, t), -jnp.inf, jnp.float32), jnp.zeros((b, kv, g, t), jnp.float32),
            jnp.zeros((b, kv, g, t, d), jnp.float32))
    if dynamic:
        _, l, acc = jax.lax.fori_loop(0, n_pages, body, init)
    else:
        sizes = page_buckets(page_table.shape[1])
        which = jnp.minimum(jnp.searchsorted(jnp.asarray(sizes, jnp.int32), n_pages), len(sizes) - 1)
        loops = [lambda c, nb=nb: jax.lax.fori_loop(0, nb, body, c) for nb in sizes]
        _, l, acc = jax.lax.switch(which, loops, init)
    out = acc / jnp.where(l > 0, l, 1.0)[..., None]
    return rearrange(out, "b kv g t d -> b t (kv g) d").astype(q.dtype)


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
