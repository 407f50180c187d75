"""Paged attention for the rollout engine as a portable Pallas kernel (decode, chunked prefill, split-K).

Owns `paged_attention(q, k_pages, v_pages, layer, page_table, q_pos, kv_len, *, impl, num_splits, block_q,
interpret)` with the engine's signature and semantics (reference: `memjax.kernels.reference.paged_attention_ref`,
re-exported here): q [b, t, H, D] at positions q_pos int32 [b, t]; pools [L, KV, P, S, D] (page 0 = null page);
`layer` a traced int32 scalar; page_table int32 [b, MP]; kv_len int32 [b]. Row (i, t) sees keys p < kv_len[i]
and p <= q_pos[i, t]; rows with no visible key return zeros. GQA: query head h uses kv head h // G. Output in q's
dtype; softmax statistics in fp32; a float8 pool is upcast page by page in the kernel. `suggest_num_splits` is a
starting heuristic for decode split-K.
Invariants: page ids, kv_len and the layer are read as scalars inside the kernel and the pools are indexed there,
never sliced outside it (that would copy a whole layer of the pool every step). On GPU S and D must be powers of
two >= 16; impl="auto" picks "pallas" on GPU when they hold, else the reference. Nothing is donated.
docs/engine.md, "Kernel design", has the grid, page visiting and split-K layout.
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl

from .kv_store import query_dtype
from .reference import paged_attention_ref
from .split_combine import combine_splits

__all__ = ["paged_attention", "paged_attention_ref", "resolve_impl", "pallas_supported",
           "suggest_num_splits", "combine_splits", "PAGED_IMPLS", "decode_from_rows", "row_block", "attend_pages",
           "row_positions", "check_decode_rows"]

PAGED_IMPLS = ("auto", "pallas", "mosaic", "reference")
_NEG = -1e30
_F32 = jnp.float32
_TN = (((1,), (1,)), ((), ()))  # a @ b.T
_MIN_ROWS = 16  # Triton dot needs M >= 16


def _on_gpu() -> bool:
    return jax.default_backend() in ("gpu", "cuda", "rocm")


def _pow2_ge16(x: int) -> bool:
    return x >= 16 and (x & (x - 1)) == 0


def pallas_supported(page_size: int, head_dim: int) -> bool:
    """Whether the compiled (non-interpret) GPU kernel handles this page size and head dim."""
    return _pow2_ge16(page_size) and _pow2_ge16(head_dim)


def resolve_impl(impl: str = "auto", page_size: int = 16, head_dim: int = 128) -> str:
    """The implementation `impl` names here: "auto" -> "pallas" on GPU for supported shapes, else "reference".
    "mosaic" (the Mosaic GPU decode kernel, paged_attention_mgpu.py) is only chosen by name: "auto" keeps the
    measured Triton kernel until the Mosaic one is measured on a GPU (docs/engine.md, "Pallas backend")."""
    if impl not in PAGED_IMPLS:
        raise ValueError(f"paged_attention: impl must be one of {PAGED_IMPLS}, got {impl!r}")
    if impl == "auto":
        return "pallas" if _on_gpu() and pallas_supported(page_size, head_dim) else "reference"
    return impl


@dataclasses.dataclass(frozen=True)
class _Cfg:
    bq: int          # query rows per program (power of two >= 16)
    page: int        # S
    max_pages: int   # MP
    splits: int
    scale: float
    interpret: bool


def attend_pages(q, qp, kvl, layer, i, h, sp, pt_ref, k_ref, v_ref, *, page: int, max_pages: int, splits: int,
                 scale: float):
    """One program's online softmax: query block q [bq, D] at positions qp [bq] of sequence i (kv head h) over split
    sp of its visible pages (see the module docstring) -> unnormalised (m [bq], l [bq], acc [bq, D]) in fp32; an
    empty split gives (-1e30, 0, 0). Shared by `_kernel` and memjax/kernels/decode_merged.py."""
    s = page
    qmax = jnp.max(qp)
    causal_pages = jnp.where(qmax >= 0, qmax // s + 1, 0)
    n_pages = jnp.minimum(jnp.minimum((kvl + s - 1) // s, causal_pages), max_pages)
    n_pages = jnp.maximum(n_pages, 0)
    per = (n_pages + splits - 1) // splits
    lo = jnp.minimum(sp * per, n_pages)
    hi = jnp.minimum(lo + per, n_pages)
    qp_col = qp[:, None]
    iota = lax.broadcasted_iota(jnp.int32, (1, s), 1)
    prec = lax.Precision.HIGHEST if q.dtype == _F32 else None  # fp32 pools: IEEE dots, not TF32

    def body(j, carry):
        m, l, acc = carry
        pg = pt_ref[i, j]
        k = k_ref[layer, h, pg]                          # [S, D]
        v = v_ref[layer, h, pg]
        if k.dtype != q.dtype:                           # a float8 pool: upcast the page, the dots stay in q's dtype
            k, v = k.astype(q.dtype), v.astype(q.dtype)
        sc = lax.dot_general(q, k, _TN, precision=prec, preferred_element_type=_F32) * scale   # [bq, S]
        key = j * s + iota
        ok = (key <= qp_col) & (key < kvl)
        sc = jnp.where(ok, sc, _NEG)
        m_new = jnp.maximum(m, jnp.max(sc, axis=1))
        alpha = jnp.exp(m - m_new)
        p = jnp.where(ok, jnp.exp(sc - m_new[:, None]), 0.0)
        l = alpha * l + jnp.sum(p, axis=1)
        acc = alpha[:, None] * acc + jnp.dot(p.astype(v.dtype), v, precision=prec,
                                           preferred_element_type=_F32)
        return m_new, l, acc

    bq, d = q.shape
    init = (jnp.full((bq,), _NEG, _F32), jnp.zeros((bq,), _F32), jnp.zeros((bq, d), _F32))
    return lax.fori_loop(lo, hi, body, init)


def _kernel(layer_ref, kvl_ref, pt_ref, qpos_ref, q_ref, k_ref, v_ref, *out_refs, cfg: _Cfg):
    i, h, sp = pl.program_id(0), pl.program_id(1), pl.program_id(3)
    m, l, acc = attend_pages(q_ref[...], qpos_ref[...], kvl_ref[i], layer_ref[0], i, h, sp, pt_ref, k_ref, v_ref,
                             page=cfg.page, max_pages=cfg.max_pages, splits=cfg.splits, scale=cfg.scale)
    if cfg.splits == 1:
        (o_ref,) = out_refs
        o_ref[...] = (acc / jnp.where(l > 0, l, 1.0)[:, None]).astype(o_ref.dtype)
    else:
        m_ref, l_ref, acc_ref = out_refs
        m_ref[...], l_ref[...], acc_ref[...] = m, l, acc


def _pallas_rows(cfg: _Cfg, layer, kv_len, page_table, qpos_rows, q_rows, k_pages, v_pages):
    """q_rows [b, KV, R, D] (R a multiple of bq), qpos_rows [b, R] -> [b, KV, R, D] (q's dtype)."""
    b, kvh, r, d = q_rows.shape
    sq = pl.Squeezed()
    grid = (b, kvh, r // cfg.bq, cfg.splits)
    whole = lambda a: pl.BlockSpec(a.shape, lambda *_: (0,) * a.ndim)  # noqa: E731
    in_specs = [whole(layer), whole(kv_len), whole(page_table),
                pl.BlockSpec((sq, cfg.bq), lambda i, h, rb, sp: (i, rb)),
                pl.BlockSpec((sq, sq, cfg.bq, d), lambda i, h, rb, sp: (i, h, rb, 0)),
                whole(k_pages), whole(v_pages)]
    if cfg.splits == 1:
        out_shape = [jax.ShapeDtypeStruct((b, kvh, r, d), q_rows.dtype)]
        out_specs = [pl.BlockSpec((sq, sq, cfg.bq, d), lambda i, h, rb, sp: (i, h, rb, 0))]
    else:
        n = cfg.splits
        out_shape = [jax.ShapeDtypeStruct((b, kvh, n, r), _F32), jax.ShapeDtypeStruct((b, kvh, n, r), _F32),
                     jax.ShapeDtypeStruct((b, kvh, n, r, d), _F32)]
        out_specs = [pl.BlockSpec((sq, sq, sq, cfg.bq), lambda i, h, rb, sp: (i, h, sp, rb)),
                     pl.BlockSpec((sq, sq, sq, cfg.bq), lambda i, h, rb, sp: (i, h, sp, rb)),
                     pl.BlockSpec((sq, sq, sq, cfg.bq, d), lambda i, h, rb, sp: (i, h, sp, rb, 0))]
    outs = pl.pallas_call(
        functools.partial(_kernel, cfg=cfg), grid=grid, in_specs=in_specs, out_specs=out_specs,
        out_shape=out_shape, interpret=cfg.interpret, name="paged_attention",
    )(layer, kv_len, page_table, qpos_rows, q_rows, k_pages, v_pages)
    if cfg.splits == 1:
        return outs[0]
    return combine_splits(*outs).astype(q_rows.dtype)


def _check(q, k_pages, v_pages, page_table, q_pos, kv_len, num_splits, block_q):
    name = "paged_attention"
    if q.ndim != 4:
        raise ValueError(f"{name}: q must be [b, t, H, D], got shape {q.shape}")
    b, t, hq, d = q.shape
    if k_pages.ndim != 5 or k_pages.shape[-1] != d:
        raise ValueError(f"{name}: k_pages must be [L, KV, P, S, D={d}], got shape {k_pages.shape}")
    if v_pages.shape != k_pages.shape:
        raise ValueError(f"{name}: v_pages {v_pages.shape} must have k_pages' shape {k_pages.shape}")
    kvh = k_pages.shape[1]
    if hq % kvh:
        raise ValueError(f"{name}: q's heads H={hq} must be a multiple of k_pages' kv heads KV={kvh}")
    if page_table.ndim != 2 or page_table.shape[0] != b or not jnp.issubdtype(page_table.dtype, jnp.integer):
        raise ValueError(f"{name}: page_table must be int [b={b}, MP], got {page_table.dtype}{page_table.shape}")
    if q_pos.shape != (b, t) or not jnp.issubdtype(q_pos.dtype, jnp.integer):
        raise ValueError(f"{name}: q_pos must be int [b={b}, t={t}], got {q_pos.dtype}{q_pos.shape}")
    if kv_len.shape != (b,) or not jnp.issubdtype(kv_len.dtype, jnp.integer):
        raise ValueError(f"{name}: kv_len must be int [b={b}], got {kv_len.dtype}{kv_len.shape}")
    if not (isinstance(num_splits, int) and num_splits >= 1):
        raise ValueError(f"{name}: num_splits must be an int >= 1, got {num_splits!r}")
    if not (isinstance(block_q, int) and _pow2_ge16(block_q)):
        raise ValueError(f"{name}: block_q must be a power of two >= 16, got {block_q!r}")


def paged_attention(q: jax.Array, k_pages: jax.Array, v_pages: jax.Array, layer, page_table: jax.Array,
                    q_pos: jax.Array, kv_len: jax.Array, *, impl: str = "auto", num_splits: int = 1,
                    block_q: int = 64, interpret: bool | None = None) -> jax.Array:
    """Attention of q [b, t, H, D] over the paged cache; same signature and result as the engine's
    reference (see the module docstring). num_splits partitions each sequence's pages (split-K);
    block_q caps the query rows (t * G, padded) per program; interpret defaults to True off GPU."""
    _check(q, k_pages, v_pages, page_table, q_pos, kv_len, num_splits, block_q)
    _, kvh, _, s, d = k_pages.shape
    impl = resolve_impl(impl, s, d)
    if impl == "reference":
        return paged_attention_ref(q, k_pages, v_pages, layer, page_table, q_pos, kv_len)
    if interpret is None:
        interpret = not _on_gpu()
    if impl == "mosaic":  # decode only (t = 1); imported here: Mosaic GPU is loaded only when chosen
        from .paged_attention_mgpu import paged_attention_mosaic
        return paged_attention_mosaic(q, k_pages, v_pages, layer, page_table, q_pos, kv_len,
                                      num_splits=num_splits, interpret=bool(interpret))
    if not interpret and not pallas_supported(s, d):
        raise ValueError(f"paged_attention: the compiled pallas kernel needs page size S={s} and head dim "
                         f"D={d} to be powers of two >= 16 (use impl='reference' or interpret=True)")
    b, t, hq, _ = q.shape
    g = hq // kvh
    r = t * g
    bq = row_block(r, block_q)
    r_pad = -(-r // bq) * bq
    # rows ordered (t, g) inside each kv head: [b, t, KV, G, D] -> [b, KV, t*G, D]
    cd = query_dtype(q.dtype, k_pages.dtype)  # a float8 pool keeps q's dtype
    q_rows = jnp.swapaxes(q.astype(cd).reshape(b, t, kvh, g, d), 1, 2).reshape(b, kvh, r, d)
    q_rows = jnp.pad(q_rows, ((0, 0), (0, 0), (0, r_pad - r), (0, 0)))
    out = _attend_rows(q_rows, k_pages, v_pages, layer, page_table, q_pos, kv_len, g, bq, num_splits, interpret)
    out = out[:, :, :r].reshape(b, kvh, t, g, d)
    return jnp.swapaxes(out, 1, 2).reshape(b, t, hq, d).astype(q.dtype)


def row_block(rows: int, block_q: int = 64) -> int:
    """Query rows per program for `rows` = t * G rows of a kv head: a power of two >= 16, at most block_q."""
    return max(_MIN_ROWS, min(block_q, pl.next_power_of_2(rows)))


def row_positions(q_pos: jax.Array, g: int, rows: int) -> jax.Array:
    """q_pos [b, t] -> the position of each kernel row [b, rows] (row t_idx * G + g; padding rows -1: no key)."""
    r = q_pos.shape[1] * g
    return jnp.pad(jnp.repeat(q_pos.astype(jnp.int32), g, axis=1), ((0, 0), (0, rows - r)), constant_values=-1)


def _attend_rows(q_rows, k_pages, v_pages, layer, page_table, q_pos, kv_len, g, bq, num_splits, interpret):
    b, _, r_pad, d = q_rows.shape
    qpos_rows = row_positions(q_pos, g, r_pad)
    cfg = _Cfg(bq=bq, page=k_pages.shape[3], max_pages=page_table.shape[1], splits=num_splits,
               scale=1.0 / float(d) ** 0.5, interpret=bool(interpret))
    layer_arr = jnp.reshape(jnp.asarray(layer, jnp.int32), (1,))
    return _pallas_rows(cfg, layer_arr, kv_len.astype(jnp.int32), page_table.astype(jnp.int32), qpos_rows,
                        q_rows, k_pages, v_pages)


def check_decode_rows(name: str, q_rows, k_pages, v_pages, q_pos, num_heads: int) -> int:
    """One-line ValueError unless q_rows [b, KV, R, D] (R >= G a power of two >= 16), pools [L, KV, P, S, D] and
    q_pos [b, 1] fit a decode from the row layout of `num_heads` query heads; returns G."""
    b, kvh, rows, _ = q_rows.shape
    g = num_heads // kvh if kvh else 0
    if (not kvh or num_heads % kvh or rows < g or not _pow2_ge16(rows) or q_pos.shape != (b, 1) or k_pages.ndim != 5
            or k_pages.shape[1] != kvh or v_pages.shape != k_pages.shape):
        raise ValueError(f"{name}: q_rows {q_rows.shape} must be [b, KV={k_pages.shape[1]}, R, D] with R >= G a power "
                         f"of two >= 16, for {num_heads} heads; q_pos [b, 1] (got {q_pos.shape}); v_pages as k_pages")
    return g


def decode_from_rows(q_rows: jax.Array, k_pages: jax.Array, v_pages: jax.Array, layer, page_table: jax.Array,
                     q_pos: jax.Array, kv_len: jax.Array, *, num_heads: int, num_splits: int = 1,
                     interpret: bool | None = None) -> jax.Array:
    """Decode attention (t = 1) from a query already in the kernel's row layout: q_rows [b, KV, R, D] (row g < G of
    kv head h = query head h*G + g; R >= G a power of two >= 16, `row_block(G)` for the fewest; rows >= G ignored), as memjax/kernels/rope_kv.py writes it;
    q_pos [b, 1]. -> [b, 1, H, D] in q_rows' dtype, equal to `paged_attention` on the unpadded query (pallas)."""
    b, kvh, rows, d = q_rows.shape
    g = check_decode_rows("decode_from_rows", q_rows, k_pages, v_pages, q_pos, num_heads)
    if interpret is None:
        interpret = not _on_gpu()
    out = _attend_rows(q_rows, k_pages, v_pages, layer, page_table, q_pos, kv_len, g, rows, num_splits, interpret)
    return out[:, :, :g].reshape(b, 1, num_heads, d)


def suggest_num_splits(batch: int, kv_heads: int, max_pages: int, *, target_programs: int = 4 * 132,
                       min_pages_per_split: int = 16) -> int:
    """A split-K count for decode: enough programs (batch x kv_heads x splits) to fill ~target_programs
    (default 4 per SM of an H100), but no split shorter than min_pages_per_split pages. A heuristic to
    start the GPU sweep from (benchmarks/paged_attention.py), not a measured optimum."""
    want = -(-target_programs // max(1, batch * kv_heads))
    return int(max(1, min(want, max_pages // max(1, min_pages_per_split))))
