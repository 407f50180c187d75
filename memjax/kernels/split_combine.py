"""Split-K attention's merge: the partial results of `num_splits` key ranges into one normalised output.

Owns `combine_splits`, shared by the Pallas decode kernel (paged_attention.py) and the Mosaic GPU one
(paged_attention_mgpu.py). Invariants: inputs are fp32; an empty split (m = -1e30, l = 0, acc = 0) drops out and a
row empty in every split gives zeros.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp


def combine_splits(m: jax.Array, l: jax.Array, acc: jax.Array) -> jax.Array:
    """Merge split-K partials m, l [..., n, R] and acc [..., n, R, D] (fp32) into normalised [..., R, D].

    Empty splits carry m = -1e30, l = 0, acc = 0 and drop out; rows empty in every split give zeros.
    """
    m_all = jnp.max(m, axis=-2, keepdims=True)
    w = jnp.exp(m - m_all)                                   # [..., n, R]
    l_all = jnp.sum(w * l, axis=-2)                          # [..., R]
    acc_all = jnp.sum(w[..., None] * acc, axis=-3)           # [..., R, D]
    return acc_all / jnp.where(l_all > 0, l_all, 1.0)[..., None]
