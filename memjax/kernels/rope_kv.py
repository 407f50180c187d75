"""The decode step's attention prologue in one Pallas kernel: q/k/v bias, RoPE, the K/V page writes and the query
laid out as the paged-attention kernel's padded row blocks (EngineConfig.kernels.fuse_rope_kv).

Owns `rope_kv(q_src, k_src, v_src, cols, bias, cos, sin, k_pages, v_pages, layer, page, off, *, num_heads, rows,
k_scale, v_scale, impl, interpret)` and its pure-JAX specification `rope_kv_ref` (same arguments and results),
for one new token per sequence. Head j of q is columns cols[0] + j*D ... + D of q_src (k, v likewise), so fused
projections pass one [b, q + 2kv] array three times and no slice of it is materialised. Returns (q_rows
[b, KV, rows, D], k_pages, v_pages): row g < G of kv head h is query head h*G + g, biased, rotated and scaled by
k_scale; rows G.. are zeros. K/V are stored as kv_store.py's `to_pool` stores them; page >= P drops the row.
Invariants: the pools are aliased in place (input_output_aliases: nothing pool-sized is copied) and come back as
outputs; q_rows has the pool's dtype (q_src's for a 1-byte pool); Triton needs D a power of two >= 32; `interpret`
defaults to True off GPU. docs/engine.md, "Kernel design", has the grid and what it replaces.
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl

from .kv_store import query_dtype, scale_query, store_rows, to_pool

__all__ = ["rope_kv", "rope_kv_ref", "ROPE_KV_IMPLS"]

ROPE_KV_IMPLS = ("pallas", "reference")


def rope_kv_ref(q_src, k_src, v_src, cols, bias, cos, sin, k_pages, v_pages, layer, page, off, *, num_heads: int,
                rows: int, k_scale: float = 1.0, v_scale: float = 1.0):
    """The specification of `rope_kv` in plain JAX: the decoder's bias and RoPE, the engine's KV scatter, the
    attention kernel's row layout."""
    b = q_src.shape[0]
    kvh, d = k_pages.shape[1], k_pages.shape[-1]
    g = num_heads // kvh
    sizes = (num_heads * d, kvh * d, kvh * d)
    xs = []
    for i, (src, c, n) in enumerate(zip((q_src, k_src, v_src), cols, sizes)):
        x = lax.slice_in_dim(src, c, c + n, axis=1)
        if bias is not None:
            x = x + lax.slice_in_dim(bias[i], c, c + n, axis=0)
        xs.append(x.reshape(b, n // d, d))
    cos, sin = cos.astype(q_src.dtype), sin.astype(q_src.dtype)
    rope = lambda x: x * cos[:, None] + jnp.concatenate([-x[..., d // 2:], x[..., : d // 2]], -1) * sin[:, None]  # noqa: E731
    q, k, v = rope(xs[0]), rope(xs[1]), xs[2]
    q = scale_query(q, k_scale).astype(query_dtype(q_src.dtype, k_pages.dtype)).reshape(b, kvh, g, d)
    q_rows = jnp.pad(q, ((0, 0), (0, 0), (0, rows - g), (0, 0)))
    k_pages = store_rows(k_pages, layer, page, off, k, k_scale)
    v_pages = store_rows(v_pages, layer, page, off, v, v_scale)
    return q_rows, k_pages, v_pages


@dataclasses.dataclass(frozen=True)
class _Cfg:
    groups: int          # G query heads per kv head
    rows: int            # row block of the attention kernel (>= G)
    cols: tuple          # first column of q, k, v in their sources
    has_bias: bool
    num_pages: int       # P: page >= P is a dropped row
    k_scale: float
    v_scale: float


def _kernel(layer_ref, page_ref, off_ref, cos_ref, sin_ref, qs_ref, ks_ref, vs_ref, qb_ref, kb_ref, vb_ref,
            _kp_in, _vp_in, q_out, kp_ref, vp_ref, *, cfg: _Cfg):
    i, h = pl.program_id(0), pl.program_id(1)
    d = q_out.shape[-1]
    half = d // 2
    lo, hi = pl.ds(0, half), pl.ds(half, half)
    c1, c2, s1, s2 = cos_ref[i, lo], cos_ref[i, hi], sin_ref[i, lo], sin_ref[i, hi]

    def load(src_ref, b_ref, col):  # the two halves of one head, biased
        x1, x2 = src_ref[i, pl.ds(col, half)], src_ref[i, pl.ds(col + half, half)]
        if cfg.has_bias:
            x1, x2 = x1 + b_ref[pl.ds(col, half)], x2 + b_ref[pl.ds(col + half, half)]
        return x1, x2

    def rope(x1, x2):  # x * cos + [-x2, x1] * sin, the reference's operation order
        return x1 * c1 + (-x2) * s1, x2 * c2 + x1 * s2

    k1, k2 = rope(*load(ks_ref, kb_ref, cfg.cols[1] + h * d))
    v1, v2 = load(vs_ref, vb_ref, cfg.cols[2] + h * d)
    layer, pg, of = layer_ref[0], page_ref[i], off_ref[i]

    @pl.when(pg < cfg.num_pages)
    def _write():
        kp_ref[layer, h, pg, of, lo] = to_pool(k1, kp_ref.dtype, cfg.k_scale)
        kp_ref[layer, h, pg, of, hi] = to_pool(k2, kp_ref.dtype, cfg.k_scale)
        vp_ref[layer, h, pg, of, lo] = to_pool(v1, vp_ref.dtype, cfg.v_scale)
        vp_ref[layer, h, pg, of, hi] = to_pool(v2, vp_ref.dtype, cfg.v_scale)

    row = lax.broadcasted_iota(jnp.int32, (cfg.rows, half), 0)
    acc1 = jnp.zeros((cfg.rows, half), q_out.dtype)
    acc2 = jnp.zeros((cfg.rows, half), q_out.dtype)
    for g in range(cfg.groups):  # static: G heads of this kv head
        y1, y2 = rope(*load(qs_ref, qb_ref, cfg.cols[0] + (h * cfg.groups + g) * d))
        y1, y2 = scale_query(y1, cfg.k_scale).astype(q_out.dtype), scale_query(y2, cfg.k_scale).astype(q_out.dtype)
        acc1 = jnp.where(row == g, y1[None, :], acc1)
        acc2 = jnp.where(row == g, y2[None, :], acc2)
    q_out[:, lo] = acc1
    q_out[:, hi] = acc2


def _check(q_src, k_src, v_src, cols, bias, cos, sin, k_pages, v_pages, page, off, num_heads, rows):
    name = "rope_kv"
    if k_pages.ndim != 5 or v_pages.shape != k_pages.shape:
        raise ValueError(f"{name}: k_pages and v_pages must both be [L, KV, P, S, D], got {k_pages.shape} and "
                         f"{v_pages.shape}")
    kvh, d = k_pages.shape[1], k_pages.shape[-1]
    if num_heads % kvh:
        raise ValueError(f"{name}: num_heads={num_heads} must be a multiple of the pool's kv heads KV={kvh}")
    if d % 2:
        raise ValueError(f"{name}: the head dim D={d} must be even (rotate-half RoPE)")
    b = q_src.shape[0]
    if len(cols) != 3:
        raise ValueError(f"{name}: cols must be the first columns of q, k and v, got {cols!r}")
    for nm, src, c, n in (("q_src", q_src, cols[0], num_heads * d), ("k_src", k_src, cols[1], kvh * d),
                          ("v_src", v_src, cols[2], kvh * d)):
        if src.ndim != 2 or src.shape[0] != b or not 0 <= c <= src.shape[1] - n:
            raise ValueError(f"{name}: {nm} must be [b={b}, >= {c} + {n}] (its heads from column {c}), got "
                             f"{src.shape}")
    if bias is not None and (len(bias) != 3 or any(bb.shape != (s.shape[1],) for bb, s in
                                                   zip(bias, (q_src, k_src, v_src)))):
        raise ValueError(f"{name}: bias must be None or three vectors as wide as q_src, k_src, v_src")
    if cos.shape != (b, d) or sin.shape != (b, d):
        raise ValueError(f"{name}: cos and sin must be [b={b}, D={d}], got {cos.shape} and {sin.shape}")
    if page.shape != (b,) or off.shape != (b,):
        raise ValueError(f"{name}: page and off must be int [b={b}], got {page.shape} and {off.shape}")
    if not (isinstance(rows, int) and rows >= num_heads // kvh):
        raise ValueError(f"{name}: rows must be an int >= G={num_heads // kvh}, got {rows!r}")


def rope_kv(q_src, k_src, v_src, cols, bias, cos, sin, k_pages, v_pages, layer, page, off, *, num_heads: int,
            rows: int, k_scale: float = 1.0, v_scale: float = 1.0, impl: str = "pallas",
            interpret: bool | None = None):
    """(q_rows [b, KV, rows, D], k_pages, v_pages): see the module docstring. impl "reference" runs `rope_kv_ref`."""
    _check(q_src, k_src, v_src, cols, bias, cos, sin, k_pages, v_pages, page, off, num_heads, rows)
    if impl not in ROPE_KV_IMPLS:
        raise ValueError(f"rope_kv: impl must be one of {ROPE_KV_IMPLS}, got {impl!r}")
    kw = dict(num_heads=num_heads, rows=rows, k_scale=float(k_scale), v_scale=float(v_scale))
    if impl == "reference":
        return rope_kv_ref(q_src, k_src, v_src, cols, bias, cos, sin, k_pages, v_pages, layer, page, off, **kw)
    if interpret is None:
        interpret = jax.default_backend() not in ("gpu", "cuda", "rocm")
    b = q_src.shape[0]
    kvh, p, d = k_pages.shape[1], k_pages.shape[2], k_pages.shape[-1]
    cfg = _Cfg(groups=num_heads // kvh, rows=rows, cols=tuple(int(c) for c in cols), has_bias=bias is not None,
               num_pages=p, k_scale=float(k_scale), v_scale=float(v_scale))
    if bias is None:  # a placeholder the kernel never reads
        bias = (jnp.zeros((1,), q_src.dtype),) * 3
    layer_arr = jnp.reshape(jnp.asarray(layer, jnp.int32), (1,))
    args = (layer_arr, page.astype(jnp.int32), off.astype(jnp.int32), cos.astype(q_src.dtype),
            sin.astype(q_src.dtype), q_src, k_src, v_src, *bias, k_pages, v_pages)
    whole = lambda a: pl.BlockSpec(a.shape, lambda *_: (0,) * a.ndim)  # noqa: E731
    sq = pl.Squeezed()
    q_dt = query_dtype(q_src.dtype, k_pages.dtype)
    return pl.pallas_call(
        functools.partial(_kernel, cfg=cfg), grid=(b, kvh), in_specs=[whole(a) for a in args],
        out_specs=[pl.BlockSpec((sq, sq, rows, d), lambda i, h: (i, h, 0, 0)), whole(k_pages), whole(v_pages)],
        out_shape=[jax.ShapeDtypeStruct((b, kvh, rows, d), q_dt), jax.ShapeDtypeStruct(k_pages.shape, k_pages.dtype),
                   jax.ShapeDtypeStruct(v_pages.shape, v_pages.dtype)],
        input_output_aliases={len(args) - 2: 1, len(args) - 1: 2}, interpret=bool(interpret), name="rope_kv",
    )(*args)
