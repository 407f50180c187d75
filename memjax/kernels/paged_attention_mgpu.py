"""Paged-attention DECODE (t = 1) as a Pallas Mosaic GPU kernel (Hopper sm90+), the Triton kernel's successor.

Owns `paged_attention_mosaic(q, k_pages, v_pages, layer, page_table, q_pos, kv_len, *, num_splits, block_k,
interpret)` and `mosaic_supported`: the signature and semantics of `memjax.kernels.paged_attention.paged_attention`
restricted to one query token per sequence (sequence i sees keys p < min(kv_len[i], q_pos[i] + 1); none -> zeros;
output in q's dtype). It exists because jax 0.11 deprecates the Pallas Triton backend (docs/engine.md, "Pallas
backend"), and uses `plgpu.kernel` with explicit TMA page gathers because jax 0.11.2's `pallas_call` has no Mosaic
GPU lowering rule.
Invariants: pool bf16 or f16 when compiled, S a multiple of 8, D a multiple of 64, G <= 64, MP <= 16381; every TMA
copy reads a real page (ids past MP are the null page, keys past the limit masked), so no stale SMEM reaches a
result; split-K partials go to the shared `combine_splits`. Nothing is donated. Without a GPU it is checked in
interpret mode and by lowering for an abstract H100; docs/engine.md, "Kernel design", has its layout.
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import mosaic_gpu as plgpu

from .split_combine import combine_splits

__all__ = ["paged_attention_mosaic", "mosaic_supported", "ROWS"]

ROWS = 64          # wgmma M: one warpgroup's row block
_NEG = -1e30
_F32 = jnp.float32
_META = 3          # meta entries before the page ids: layer, kv_len, q_pos
_META_COLS = 64    # meta rows [b, W / 64, 64]: a TMA box is at most 256 elements along each dimension


def _smem_transforms(minor: int, dtype) -> tuple:
    bits = jnp.dtype(dtype).itemsize * 8
    swizzle = plgpu.find_swizzle(minor * bits, "paged_attention_mosaic SMEM operand")
    return (plgpu.TilingTransform((8, 8 * swizzle // bits)), plgpu.SwizzleTransform(swizzle))


@dataclasses.dataclass(frozen=True)
class _Cfg:
    page: int        # S
    max_pages: int   # MP
    ppb: int         # pages per key block (block = ppb * S keys, the wgmma N of QK^T and K of PV)
    splits: int
    scale: float
    dtype: jnp.dtype  # pool dtype


def _body(meta_ref, q_ref, k_ref, v_ref, *refs, cfg: _Cfg):
    n_out = 1 if cfg.splits == 1 else 3
    out_refs, (meta_s, q_s, k_s, v_s, p_s, o_s, ml_s, bars) = refs[:n_out], refs[n_out:]
    meta_bar, q_bar, k_bar, v_bar = bars
    i, h, sp = lax.axis_index("b"), lax.axis_index("h"), lax.axis_index("sp")
    s = cfg.page

    plgpu.copy_gmem_to_smem(meta_ref.at[i], meta_s, meta_bar)
    plgpu.copy_gmem_to_smem(q_ref.at[i, h], q_s, q_bar)
    plgpu.barrier_wait(meta_bar)
    layer, kvl, qpos = meta_s[0, 0], meta_s[0, 1], meta_s[0, 2]
    lim = jnp.maximum(jnp.minimum(kvl, qpos + 1), 0)            # keys [0, lim) are visible
    n_pages = jnp.minimum((lim + s - 1) // s, cfg.max_pages)
    n_blocks = (n_pages + cfg.ppb - 1) // cfg.ppb
    per = (n_blocks + cfg.splits - 1) // cfg.splits
    lo = jnp.minimum(sp * per, n_blocks)
    hi = jnp.minimum(lo + per, n_blocks)

    def fetch(blk, slot):
        # ppb page gathers per block, each one arrival on the slot's barrier (num_arrivals = ppb); meta past
        # MP is 0 (the null page), and past-lim keys are masked below, so every copy reads a real page
        for r in range(cfg.ppb):
            idx = _META + blk * cfg.ppb + r
            page = meta_s[idx // _META_COLS, idx % _META_COLS]
            rows = pl.ds(r * s, s)
            plgpu.copy_gmem_to_smem(k_ref.at[layer, h, page], k_s.at[slot, rows], k_bar.at[slot])
            plgpu.copy_gmem_to_smem(v_ref.at[layer, h, page], v_s.at[slot, rows], v_bar.at[slot])

    @pl.when(lo < hi)
    def _():
        fetch(lo, 0)

    plgpu.barrier_wait(q_bar)
    wg = plgpu.Layout.WGMMA
    bk = cfg.ppb * s
    m = plgpu.layout_cast(jnp.full((ROWS,), _NEG, _F32), wg.reduce(1))
    l = plgpu.layout_cast(jnp.full((ROWS,), 0.0, _F32), wg.reduce(1))
    acc = plgpu.layout_cast(jnp.full((ROWS, q_s.shape[-1]), 0.0, _F32), wg)

    def step(blk, carry):
        m, l, acc = carry
        slot = lax.rem(blk - lo, 2)

        @pl.when(blk + 1 < hi)  # the other slot's wgmmas completed last iteration: safe to overwrite
        def _():
            fetch(blk + 1, 1 - slot)

        plgpu.barrier_wait(k_bar.at[slot])

        def qk(acc_ref):
            plgpu.wgmma(acc_ref, q_s, k_s.at[slot].transpose((1, 0)))
            return acc_ref[...]
        sc = pl.run_scoped(qk, plgpu.ACC((ROWS, bk), _F32)) * cfg.scale
        key = blk * bk + plgpu.broadcasted_iota(jnp.int32, (ROWS, bk), 1, layout=wg)
        ok = key < lim
        sc = jnp.where(ok, sc, _NEG)
        m_new = jnp.maximum(m, sc.max(axis=1))
        alpha = jnp.exp(m - m_new)
        p = jnp.where(ok, jnp.exp(sc - lax.broadcast_in_dim(m_new, sc.shape, [0])), 0.0)
        l = l * alpha + p.sum(axis=1)
        acc = acc * lax.broadcast_in_dim(alpha, acc.shape, [0])
        plgpu.barrier_wait(v_bar.at[slot])

        # p goes through SMEM (GPU interpret mode's wgmma takes only SMEM operands) into a fresh accumulator
        # (run_state(ACC.init(acc)) has no GPU-interpret rule): one path for interpret and compiled
        p_s[...] = p.astype(cfg.dtype)
        plgpu.commit_smem()

        def pv(acc_ref):
            plgpu.wgmma(acc_ref, p_s, v_s.at[slot])
            return acc_ref[...]
        acc = acc + pl.run_scoped(pv, plgpu.ACC(acc.shape, _F32))
        return m_new, l, acc

    m, l, acc = lax.fori_loop(lo, hi, step, (m, l, acc))
    if cfg.splits == 1:
        (o_ref,) = out_refs
        o_s[...] = (acc / lax.broadcast_in_dim(jnp.where(l > 0, l, 1.0), acc.shape, [0])).astype(o_s.dtype)
        plgpu.commit_smem()
        plgpu.copy_smem_to_gmem(o_s, o_ref.at[i, h])
    else:
        m_ref, l_ref, acc_ref = out_refs
        o_s[...] = acc
        ml_s[0] = m
        ml_s[1] = l
        plgpu.commit_smem()
        plgpu.copy_smem_to_gmem(o_s, acc_ref.at[i, h, sp])
        plgpu.copy_smem_to_gmem(ml_s.at[0], m_ref.at[i, h, sp])
        plgpu.copy_smem_to_gmem(ml_s.at[1], l_ref.at[i, h, sp])
    plgpu.wait_smem_to_gmem(0)


def _call(cfg: _Cfg, meta, q_rows, k_pages, v_pages, interpret):
    """meta int32 [b, W], q_rows [b, KV, ROWS, D] (pool dtype) -> [b, KV, ROWS, D] (pool dtype)."""
    b, kvh, _, d = q_rows.shape
    n, bk = cfg.splits, cfg.ppb * cfg.page
    tr = _smem_transforms(d, cfg.dtype)
    if n == 1:
        out_type = jax.ShapeDtypeStruct((b, kvh, ROWS, d), cfg.dtype)
        o_scratch, ml_scratch = plgpu.SMEM((ROWS, d), cfg.dtype), None
    else:
        out_type = (jax.ShapeDtypeStruct((b, kvh, n, ROWS), _F32), jax.ShapeDtypeStruct((b, kvh, n, ROWS), _F32),
                    jax.ShapeDtypeStruct((b, kvh, n, ROWS, d), _F32))
        o_scratch, ml_scratch = plgpu.SMEM((ROWS, d), _F32), plgpu.SMEM((2, ROWS), _F32)
    scratch = [plgpu.SMEM(meta.shape[1:], jnp.int32),
               plgpu.SMEM((ROWS, d), cfg.dtype, transforms=tr),
               plgpu.SMEM((2, bk, d), cfg.dtype, transforms=tr),
               plgpu.SMEM((2, bk, d), cfg.dtype, transforms=tr),
               plgpu.SMEM((ROWS, bk), cfg.dtype, transforms=_smem_transforms(bk, cfg.dtype)),
               o_scratch, ml_scratch,
               (plgpu.Barrier(), plgpu.Barrier(), plgpu.Barrier(num_arrivals=cfg.ppb, num_barriers=2),
                plgpu.Barrier(num_arrivals=cfg.ppb, num_barriers=2))]
    outs = plgpu.kernel(
        functools.partial(_body, cfg=cfg), out_type=out_type, scratch_types=scratch,
        grid=(b, kvh, n), grid_names=("b", "h", "sp"),
        interpret=plgpu.InterpretGPUParams() if interpret else None,
    )(meta, q_rows, k_pages, v_pages)
    if n == 1:
        return outs
    return combine_splits(*outs).astype(cfg.dtype)


def _block_pages(page_size: int, block_k: int) -> int:
    return max(1, block_k // page_size)


def mosaic_supported(page_size: int, head_dim: int, dtype, group: int = 1, block_k: int = 64) -> bool:
    """Whether the compiled (non-interpret) Mosaic GPU kernel handles these shapes and pool dtype: a 16-bit
    pool (fp32 wgmma would be TF32), key blocks of a multiple of 64 (128-byte swizzle; the PV wgmma's K),
    pages of a multiple of 8 rows (SMEM tiling), D a multiple of 64, G <= 64."""
    bk = _block_pages(page_size, block_k) * page_size
    return (jnp.dtype(dtype) in (jnp.dtype(jnp.bfloat16), jnp.dtype(jnp.float16)) and page_size % 8 == 0
            and bk % 64 == 0 and head_dim % 64 == 0 and 1 <= group <= ROWS)


def paged_attention_mosaic(q: jax.Array, k_pages: jax.Array, v_pages: jax.Array, layer, page_table: jax.Array,
                           q_pos: jax.Array, kv_len: jax.Array, *, num_splits: int = 1, block_k: int = 64,
                           interpret: bool = False) -> jax.Array:
    """Decode attention (t = 1) of q [b, 1, H, D] over the paged cache with the Mosaic GPU kernel; the
    caller (`paged_attention(impl="mosaic")`) has validated shapes. block_k: keys per block (rounded
    down to whole pages, at least one); interpret=True runs it on CPU in GPU interpret mode."""
    b, t, hq, d = q.shape
    _, kvh, _, s, _ = k_pages.shape
    g = hq // kvh
    if t != 1:
        raise ValueError(f"paged_attention: impl='mosaic' is decode-only (t = 1), got t={t}; "
                         "use impl='pallas' or 'reference' for prefill chunks")
    if g > ROWS:
        raise ValueError(f"paged_attention: impl='mosaic' handles at most {ROWS} query heads per kv head, got {g}")
    if not (isinstance(block_k, int) and block_k >= 1):
        raise ValueError(f"paged_attention: block_k must be an int >= 1, got {block_k!r}")
    ppb = _block_pages(s, block_k)
    isz = jnp.dtype(k_pages.dtype).itemsize
    if isz == 1:
        raise ValueError(f"paged_attention: impl='mosaic' reads bf16/f16 (or interpreted fp32) pools, not "
                         f"{k_pages.dtype}; use impl='pallas' or 'reference' for a float8 pool")
    if not interpret and not mosaic_supported(s, d, k_pages.dtype, g, block_k):
        raise ValueError(f"paged_attention: the compiled mosaic kernel needs a bf16/f16 pool (got {k_pages.dtype}), "
                         f"page size S={s} a multiple of 8, key blocks of a multiple of 64 (got {ppb * s}) and "
                         f"head dim D={d} a multiple of 64 (use impl='pallas' or 'reference')")
    if s % 8 or (ppb * s * isz) % 32 or (d * isz) % 32:
        raise ValueError(f"paged_attention: impl='mosaic' needs S % 8 == 0 and key blocks and D spanning multiples "
                         f"of 32 bytes (the smallest SMEM swizzle), got S={s}, block {ppb * s}, D={d} in "
                         f"{k_pages.dtype}")
    mp = page_table.shape[1]
    w = -(-(_META + -(-mp // ppb) * ppb) // _META_COLS) * _META_COLS  # every block's page ids (0 past MP)
    if w // _META_COLS > 256:
        raise ValueError(f"paged_attention: impl='mosaic' handles at most {256 * _META_COLS - _META} pages per "
                         f"sequence, got MP={mp}")
    meta = jnp.concatenate([
        jnp.broadcast_to(jnp.asarray(layer, jnp.int32), (b, 1)), kv_len.astype(jnp.int32)[:, None],
        q_pos.astype(jnp.int32)[:, :1], page_table.astype(jnp.int32),
        jnp.zeros((b, w - _META - mp), jnp.int32)], axis=1).reshape(b, w // _META_COLS, _META_COLS)
    q_rows = q.astype(k_pages.dtype).reshape(b, kvh, g, d)   # t = 1: rows are the G heads of a kv head
    q_rows = jnp.pad(q_rows, ((0, 0), (0, 0), (0, ROWS - g), (0, 0)))
    cfg = _Cfg(page=s, max_pages=mp, ppb=ppb, splits=num_splits, scale=1.0 / float(d) ** 0.5,
               dtype=jnp.dtype(k_pages.dtype))
    out = _call(cfg, meta, q_rows, k_pages, v_pages, bool(interpret))
    return out[:, :, :g].reshape(b, 1, hq, d).astype(q.dtype)
