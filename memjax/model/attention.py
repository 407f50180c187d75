"""Swappable attention back-ends for the decoder.

An attention back-end is any callable `fn(q, k, v, *, layer, state) -> (out, state)` with
q [B, T, H, D], k/v [B, T, KV, D] (rotary already applied, KV heads NOT repeated), `layer` the (possibly
traced) layer index, and `state` whatever the back-end threads through the layers (nothing for dense
attention; a paged KV cache for the engine). `out` is [B, T, H, D] in q's dtype. The model never looks
inside `state`, so paged and Pallas kernels plug in without touching the model.

`DenseCausal` is the reference: full causal attention over the given tokens with optional segment ids
(packed sequences / left padding: a token attends only to earlier tokens of its own segment; segment 0
marks padding that attends to itself only, so no row is empty). Softmax in float32.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import jax
import jax.numpy as jnp
from einops import rearrange


class AttentionFn(Protocol):
    def __call__(self, q: jax.Array, k: jax.Array, v: jax.Array, *, layer: jax.Array,
                 state: Any) -> tuple[jax.Array, Any]: ...


def grouped_attention(q: jax.Array, k: jax.Array, v: jax.Array, mask: jax.Array) -> jax.Array:
    """GQA without repeating K/V: q [B,T,H,D], k/v [B,S,KV,D], mask bool [B,T,S] -> [B,T,H,D]."""
    kv = k.shape[2]
    qg = rearrange(q, "b t (kv g) d -> b kv g t d", kv=kv)
    scale = 1.0 / jnp.sqrt(jnp.float32(q.shape[-1]))
    s = jnp.einsum("bkgtd,bskd->bkgts", qg, k, preferred_element_type=jnp.float32) * scale
    s = jnp.where(mask[:, None, None, :, :], s, jnp.finfo(jnp.float32).min)
    p = jax.nn.softmax(s, axis=-1).astype(v.dtype)
    o = jnp.einsum("bkgts,bskd->bkgtd", p, v, preferred_element_type=jnp.float32)
    return rearrange(o, "b kv g t d -> b t (kv g) d").astype(q.dtype)


@dataclass(frozen=True)
class DenseCausal:
    """Reference causal attention. `state` may be None or an int [B, T] segment-id array."""

    def __call__(self, q, k, v, *, layer, state):
        t = q.shape[1]
        causal = jnp.tril(jnp.ones((t, t), dtype=bool))[None]
        if state is None:
            mask = jnp.broadcast_to(causal, (q.shape[0], t, t))
        else:
            seg = state
            same = seg[:, :, None] == seg[:, None, :]
            diag = jnp.eye(t, dtype=bool)[None]
            mask = (causal & same & (seg[:, :, None] > 0)) | diag
        return grouped_attention(q, k, v, mask), state
