"""How the paged KV pool stores values, shared by the engine's writes and the kernels that write or read the pool.

Owns `to_pool` (a value as a pool of a dtype stores it), `store_rows` (the scatter of one row per sequence into
`[L, KV, P, S, D]` pages), `query_dtype` (the dtype a query is read in against a pool) and `scale_query` (a float8
pool's k_scale folded into the query). A float8 (1-byte) pool stores clip(x / scale, +-max finite) - a plain
float8_e4m3fn cast of an out-of-range value would be NaN, it has no infinity - and its query keeps its own dtype
(the kernels upcast each loaded page); other pools store a plain cast and read the query in the pool's dtype.
Nothing is donated.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

__all__ = ["to_pool", "store_rows", "query_dtype", "scale_query"]


def to_pool(x: jax.Array, dtype, scale: float = 1.0) -> jax.Array:
    """x as stored in a pool of `dtype`: a plain cast, or for a 1-byte (float8) pool clip(x / scale, +-max finite)."""
    dtype = jnp.dtype(dtype)
    if dtype.itemsize != 1:
        return x.astype(dtype)
    lim = float(jnp.finfo(dtype).max)
    return jnp.clip(x.astype(jnp.float32) / jnp.float32(scale), -lim, lim).astype(dtype)


def store_rows(pages: jax.Array, layer, page: jax.Array, off: jax.Array, rows: jax.Array,
               scale: float = 1.0) -> jax.Array:
    """pages [L, KV, P, S, D] with rows [N, KV, D] stored at (layer, :, page[n], off[n]); a page >= P drops its row.
    The (page, off) pairs must be distinct: the scatter is declared unique (plain stores on a GPU, where a
    non-unique 16-bit scatter is a compare-and-swap loop per element)."""
    return pages.at[layer, :, page, off].set(to_pool(rows, pages.dtype, scale), mode="drop", unique_indices=True)


def query_dtype(q_dtype, pool_dtype):
    """The dtype attention reads the query in: q's own against a 1-byte pool, else the pool's."""
    return q_dtype if jnp.dtype(pool_dtype).itemsize == 1 else pool_dtype


def scale_query(q: jax.Array, k_scale: float) -> jax.Array:
    """q times a float8 pool's k_scale (q . k = (q k_scale) . (k / k_scale)), in fp32, back in q's dtype."""
    return q if k_scale == 1.0 else (q.astype(jnp.float32) * k_scale).astype(q.dtype)
