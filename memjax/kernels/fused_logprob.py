"""Fused masked token log-prob + entropy over a vocabulary-tiled LM head: [N, V] logits never exist.

Owns `token_logprob_entropy(hidden [..., D], w [D, V], targets [...], mask [...])` -> (logp, entropy), float32
shaped like `targets`, under softmax(h·W / T); tokens with mask == 0 return 0 and get zero gradient. Reference:
`memjax.kernels.reference.token_logprob_entropy_ref`. The forward is an online logsumexp over vocab tiles; the
custom VJP saves nothing [N, V] and recomputes the tiles. impl "pallas" (portable `pl.pallas_call`), "chunked"
(pure JAX over the same tiles, the default), "reference" (dense autodiff), "auto" (= chunked).
Invariants: compact=True (default) permutes valid tokens first so cost follows the valid token count; W is never
padded or copied (the last vocab tile overlaps its neighbour, covered columns masked); matmuls accumulate in fp32
and dh, dW come back in h's and W's dtypes; targets of valid tokens lie in [0, V). Nothing is donated.
docs/engine.md, "Kernel design", has the formulas, tiling and row-block rule; "Kernels and their defaults" the
measurements behind "auto".
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl

from .reference import token_logprob_entropy_ref

__all__ = ["token_logprob_entropy", "resolve_impl", "chunked_block_rows", "IMPLS"]

IMPLS = ("auto", "pallas", "chunked", "reference")
_DEFAULT_BLOCKS = {"pallas": (128, 128, 64), "chunked": (2048, 8192, 0)}  # rows, vocab, d-chunk
_MIN_BLOCKS, _SMALL_BLOCK = 8, 256  # chunked: row blocks of 256..2048 rows, at least 8 of them where n allows
_NEG = -1e30
_F32 = jnp.float32
_TN = (((1,), (1,)), ((), ()))  # a @ b.T
_TT = (((0,), (0,)), ((), ()))  # a.T @ b


@dataclasses.dataclass(frozen=True)
class _Cfg:
    impl: str
    inv_t: float
    bn: int
    bv: int
    bd: int
    interpret: bool


def resolve_impl(impl: str = "auto") -> str:
    """The implementation `impl` names ("auto" -> "chunked" on every backend).

    The Pallas kernel becomes the GPU default only once a GPU measurement shows it beats the chunked
    XLA path (docs/architecture.md, principle 4; none has been taken yet). Ask for it with impl="pallas"."""
    if impl not in IMPLS:
        raise ValueError(f"token_logprob_entropy: impl must be one of {IMPLS}, got {impl!r}")
    return "chunked" if impl == "auto" else impl


def _pow2_floor(x: int) -> int:
    return 1 << (max(int(x), 1).bit_length() - 1)


def chunked_block_rows(n: int) -> int:
    """The chunked path's default row block for n rows: the power of two that cuts n into at least _MIN_BLOCKS blocks,
    within [_SMALL_BLOCK, 2048] (module docstring: a block with no valid row is skipped, so finer blocks of a short call
    skip more of its masked rows)."""
    return min(_DEFAULT_BLOCKS["chunked"][0], max(_SMALL_BLOCK, _pow2_floor(-(-n // _MIN_BLOCKS))))


# ---- tile math shared by the pallas kernels and the chunked path (plain jnp on [bn, bv] tiles) ----

def _tile_start(c, bv: int, v: int):
    return jnp.minimum(c * bv, v - bv)


def _init_stats(bn: int):
    return (jnp.full((bn,), _NEG, _F32), jnp.zeros((bn,), _F32), jnp.zeros((bn,), _F32),
            jnp.zeros((bn,), _F32))


def _online_update(stats, z, cols, colv, tgt):
    m, s, t, zt = stats
    m_new = jnp.maximum(m, jnp.max(jnp.where(colv, z, _NEG), axis=1))
    alpha = jnp.exp(m - m_new)
    zc = z - m_new[:, None]
    e = jnp.where(colv, jnp.exp(zc), 0.0)
    t = alpha * (t + s * (m - m_new)) + jnp.sum(e * zc, axis=1)
    s = alpha * s + jnp.sum(e, axis=1)
    zt = zt + jnp.sum(jnp.where(colv & (cols == tgt[:, None]), z, 0.0), axis=1)
    return m_new, s, t, zt


def _finalize(stats, valid):
    m, s, t, zt = stats
    log_s = jnp.log(s)
    lse = m + log_s
    return jnp.where(valid, zt - lse, 0.0), jnp.where(valid, log_s - t / s, 0.0), lse


def _grad_tile(z, cols, colv, tgt, lse, ent, g_lp, g_ent, inv_t):
    logp = z - lse[:, None]
    p = jnp.exp(logp)
    gz = jnp.where(cols == tgt[:, None], g_lp[:, None], 0.0) - p * (
        g_lp[:, None] + g_ent[:, None] * (logp + ent[:, None]))
    return jnp.where(colv, gz, 0.0) * inv_t


# ---- pallas kernels ----

def _logits_pl(h_ref, w_ref, rows, start, cfg: _Cfg, d: int):
    """(h[rows] @ W[:, start:start+bv]) / T, looping D in power-of-two chunks of bd."""
    def body(k, acc):
        off = pl.multiple_of(k * cfg.bd, cfg.bd)
        hk = h_ref[rows, pl.ds(off, cfg.bd)]
        wk = w_ref[pl.ds(off, cfg.bd), pl.ds(start, cfg.bv)]
        return acc + jnp.dot(hk, wk, preferred_element_type=_F32)
    acc = lax.fori_loop(0, d // cfg.bd, body, jnp.zeros((cfg.bn, cfg.bv), _F32))
    return acc * cfg.inv_t


def _fwd_kernel(tgt_ref, valid_ref, h_ref, w_ref, logp_ref, ent_ref, lse_ref, *, cfg: _Cfg, d, v):
    valid = valid_ref[...]
    live = jnp.max(valid) > 0
    nv = pl.cdiv(v, cfg.bv)

    @pl.when(live)
    def _():
        tgt = tgt_ref[...]

        def body(c, stats):
            start = _tile_start(c, cfg.bv, v)
            cols = start + lax.broadcasted_iota(jnp.int32, (1, cfg.bv), 1)
            z = _logits_pl(h_ref, w_ref, slice(None), start, cfg, d)
            return _online_update(stats, z, cols, cols >= c * cfg.bv, tgt)

        logp, ent, lse = _finalize(lax.fori_loop(0, nv, body, _init_stats(cfg.bn)), valid > 0)
        logp_ref[...], ent_ref[...], lse_ref[...] = logp, ent, lse

    @pl.when(jnp.logical_not(live))
    def _():
        zero = jnp.zeros((cfg.bn,), _F32)
        logp_ref[...], ent_ref[...], lse_ref[...] = zero, zero, zero


def _dh_kernel(tgt_ref, valid_ref, lse_ref, ent_ref, glp_ref, gent_ref, h_ref, w_ref, dh_ref, *,
               cfg: _Cfg, d, v):
    nd, nv = d // cfg.bd, pl.cdiv(v, cfg.bv)

    def zero(k, carry):
        dh_ref[:, pl.ds(pl.multiple_of(k * cfg.bd, cfg.bd), cfg.bd)] = jnp.zeros((cfg.bn, cfg.bd), _F32)
        return carry
    lax.fori_loop(0, nd, zero, 0)

    @pl.when(jnp.max(valid_ref[...]) > 0)
    def _():
        tgt, lse, ent, glp, gent = tgt_ref[...], lse_ref[...], ent_ref[...], glp_ref[...], gent_ref[...]

        def body(c, carry):
            start = _tile_start(c, cfg.bv, v)
            cols = start + lax.broadcasted_iota(jnp.int32, (1, cfg.bv), 1)
            z = _logits_pl(h_ref, w_ref, slice(None), start, cfg, d)
            gz = _grad_tile(z, cols, cols >= c * cfg.bv, tgt, lse, ent, glp, gent, cfg.inv_t)
            gz = gz.astype(w_ref.dtype)

            def dbody(k, carry2):
                off = pl.multiple_of(k * cfg.bd, cfg.bd)
                wk = w_ref[pl.ds(off, cfg.bd), pl.ds(start, cfg.bv)]
                dh_ref[:, pl.ds(off, cfg.bd)] += lax.dot_general(gz, wk, _TN, preferred_element_type=_F32)
                return carry2
            return lax.fori_loop(0, nd, dbody, carry)
        lax.fori_loop(0, nv, body, 0)


def _dw_kernel(tgt_ref, valid_ref, lse_ref, ent_ref, glp_ref, gent_ref, h_ref, w_ref, *out_refs,
               cfg: _Cfg, d, v, n):
    """One program per vocab tile j: dW[:, tile j] = Σ_row-blocks h_bᵀ·dz_b (full tiles to out_refs[0],
    the overlapping last tile, if V % bv != 0, to out_refs[1])."""
    j = pl.program_id(0)
    start = _tile_start(j, cfg.bv, v)
    cols = start + lax.broadcasted_iota(jnp.int32, (1, cfg.bv), 1)
    colv = cols >= 0  # every column of the tile is computed; the stitch keeps the right ones
    nd, nb, n_full = d // cfg.bd, n // cfg.bn, v // cfg.bv

    def accumulate(dst_ref, dst_start):
        def zero(k, carry):
            off = pl.multiple_of(k * cfg.bd, cfg.bd)
            dst_ref[pl.ds(off, cfg.bd), pl.ds(dst_start, cfg.bv)] = jnp.zeros((cfg.bd, cfg.bv), _F32)
            return carry
        lax.fori_loop(0, nd, zero, 0)

        def rows_body(b, carry):
            r0 = pl.multiple_of(b * cfg.bn, cfg.bn)
            rows = pl.ds(r0, cfg.bn)

            @pl.when(jnp.max(valid_ref[rows]) > 0)
            def _():
                z = _logits_pl(h_ref, w_ref, rows, start, cfg, d)
                gz = _grad_tile(z, cols, colv, tgt_ref[rows], lse_ref[rows], ent_ref[rows],
                                glp_ref[rows], gent_ref[rows], cfg.inv_t).astype(w_ref.dtype)

                def dbody(k, carry2):
                    off = pl.multiple_of(k * cfg.bd, cfg.bd)
                    hk = h_ref[rows, pl.ds(off, cfg.bd)]
                    dst_ref[pl.ds(off, cfg.bd), pl.ds(dst_start, cfg.bv)] += lax.dot_general(
                        hk, gz, _TT, preferred_element_type=_F32)
                    return carry2
                lax.fori_loop(0, nd, dbody, 0)
            return carry
        lax.fori_loop(0, nb, rows_body, 0)

    if len(out_refs) == 1:
        accumulate(out_refs[0], start)
    else:
        pl.when(j < n_full)(lambda: accumulate(out_refs[0], start))
        pl.when(j >= n_full)(lambda: accumulate(out_refs[1], 0))


def _pallas_fwd(cfg: _Cfg, h, w, tgt, valid):
    n, d = h.shape
    v = w.shape[1]
    row = pl.BlockSpec((cfg.bn,), lambda i: (i,))
    out = jax.ShapeDtypeStruct((n,), _F32)
    return pl.pallas_call(
        functools.partial(_fwd_kernel, cfg=cfg, d=d, v=v), grid=(n // cfg.bn,),
        in_specs=[row, row, pl.BlockSpec((cfg.bn, d), lambda i: (i, 0)),
                  pl.BlockSpec((d, v), lambda i: (0, 0))],
        out_specs=[row, row, row], out_shape=[out, out, out], interpret=cfg.interpret,
        name="fused_logprob_fwd")(tgt, valid, h, w)


def _pallas_bwd(cfg: _Cfg, h, w, tgt, valid, lse, ent, g_lp, g_ent):
    n, d = h.shape
    v = w.shape[1]
    row = pl.BlockSpec((cfg.bn,), lambda i: (i,))
    dh = pl.pallas_call(
        functools.partial(_dh_kernel, cfg=cfg, d=d, v=v), grid=(n // cfg.bn,),
        in_specs=[row] * 6 + [pl.BlockSpec((cfg.bn, d), lambda i: (i, 0)),
                              pl.BlockSpec((d, v), lambda i: (0, 0))],
        out_specs=pl.BlockSpec((cfg.bn, d), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct((n, d), _F32), interpret=cfg.interpret,
        name="fused_logprob_bwd_dh")(tgt, valid, lse, ent, g_lp, g_ent, h, w)
    n_full, tail = v // cfg.bv, v % cfg.bv
    out_shape = [jax.ShapeDtypeStruct((d, v), _F32)]
    out_specs = [pl.BlockSpec((d, v), lambda j: (0, 0))]
    if tail:
        out_shape.append(jax.ShapeDtypeStruct((d, cfg.bv), _F32))
        out_specs.append(pl.BlockSpec((d, cfg.bv), lambda j: (0, 0)))
    full = lambda a: pl.BlockSpec(a.shape, lambda j: (0,) * a.ndim)  # noqa: E731
    args = (tgt, valid, lse, ent, g_lp, g_ent, h, w)
    outs = pl.pallas_call(
        functools.partial(_dw_kernel, cfg=cfg, d=d, v=v, n=n), grid=(pl.cdiv(v, cfg.bv),),
        in_specs=[full(a) for a in args], out_specs=out_specs, out_shape=out_shape,
        interpret=cfg.interpret, name="fused_logprob_bwd_dw")(*args)
    dw = outs[0]
    if tail:  # columns [n_full*bv, V) come from the overlapping tile that starts at V - bv
        dw = dw.at[:, n_full * cfg.bv:].set(outs[1][:, cfg.bv - tail:])
    return dh.astype(h.dtype), dw.astype(w.dtype)


# ---- chunked pure-JAX path ----

def _chunked_fwd(cfg: _Cfg, h, w, tgt, valid):
    n, d = h.shape
    v = w.shape[1]
    nb, nv = n // cfg.bn, pl.cdiv(v, cfg.bv)

    def block(xs):
        hb, tb, vb = xs

        def compute(_):
            def step(stats, c):
                start = _tile_start(c, cfg.bv, v)
                cols = start + jnp.arange(cfg.bv, dtype=jnp.int32)[None, :]
                z = jnp.dot(hb, lax.dynamic_slice_in_dim(w, start, cfg.bv, axis=1),
                            preferred_element_type=_F32) * cfg.inv_t
                return _online_update(stats, z, cols, cols >= c * cfg.bv, tb), None
            stats, _ = lax.scan(step, _init_stats(cfg.bn), jnp.arange(nv, dtype=jnp.int32))
            return _finalize(stats, vb > 0)
        return lax.cond(jnp.any(vb > 0), compute, lambda _: (jnp.zeros((cfg.bn,), _F32),) * 3, None)

    outs = lax.map(block, (h.reshape(nb, cfg.bn, d), tgt.reshape(nb, cfg.bn), valid.reshape(nb, cfg.bn)))
    return tuple(o.reshape(n) for o in outs)


def _chunked_bwd(cfg: _Cfg, h, w, tgt, valid, lse, ent, g_lp, g_ent):
    n, d = h.shape
    v = w.shape[1]
    nb, nv = n // cfg.bn, pl.cdiv(v, cfg.bv)
    blocks = tuple(x.reshape(nb, cfg.bn, *x.shape[1:]) for x in (h, tgt, valid, lse, ent, g_lp, g_ent))

    def vstep(carry, c):
        dh, dw = carry
        start = _tile_start(c, cfg.bv, v)
        cols = start + jnp.arange(cfg.bv, dtype=jnp.int32)[None, :]
        colv = cols >= c * cfg.bv
        wc = lax.dynamic_slice_in_dim(w, start, cfg.bv, axis=1)

        def rstep(dwc, xs):
            hb, tb, vb, lb, eb, glb, geb = xs

            def compute(dwc):
                z = jnp.dot(hb, wc, preferred_element_type=_F32) * cfg.inv_t
                gz = _grad_tile(z, cols, colv, tb, lb, eb, glb, geb, cfg.inv_t).astype(w.dtype)
                return (dwc + lax.dot_general(hb, gz, _TT, preferred_element_type=_F32),
                        lax.dot_general(gz, wc, _TN, preferred_element_type=_F32))
            return lax.cond(jnp.any(vb > 0), compute,
                            lambda dwc: (dwc, jnp.zeros((cfg.bn, d), _F32)), dwc)

        dwc, dh_blocks = lax.scan(rstep, jnp.zeros((d, cfg.bv), _F32), blocks)
        old = lax.dynamic_slice_in_dim(dw, start, cfg.bv, axis=1)
        dw = lax.dynamic_update_slice_in_dim(dw, jnp.where(colv, dwc.astype(w.dtype), old), start, axis=1)
        return (dh + dh_blocks.reshape(n, d), dw), None

    init = (jnp.zeros((n, d), _F32), jnp.zeros((d, v), w.dtype))
    (dh, dw), _ = lax.scan(vstep, init, jnp.arange(nv, dtype=jnp.int32))
    return dh.astype(h.dtype), dw


@functools.lru_cache(maxsize=None)
def _core(cfg: _Cfg):
    fwd_impl, bwd_impl = ((_pallas_fwd, _pallas_bwd) if cfg.impl == "pallas"
                          else (_chunked_fwd, _chunked_bwd))

    @jax.custom_vjp
    def core(h, w, tgt, valid):
        logp, ent, _ = fwd_impl(cfg, h, w, tgt, valid)
        return logp, ent

    def fwd(h, w, tgt, valid):
        logp, ent, lse = fwd_impl(cfg, h, w, tgt, valid)
        return (logp, ent), (h, w, tgt, valid, lse, ent)

    def bwd(res, g):
        h, w, tgt, valid, lse, ent = res
        g_lp, g_ent = (gi.astype(_F32) * valid for gi in g)
        dh, dw = bwd_impl(cfg, h, w, tgt, valid, lse, ent, g_lp, g_ent)
        return dh, dw, None, None

    core.defvjp(fwd, bwd)
    return core


def token_logprob_entropy(hidden, w, targets, mask, *, temperature: float = 1.0, impl: str = "auto",
                          compact: bool = True, block_rows: int | None = None,
                          block_vocab: int | None = None, block_d: int | None = None,
                          interpret: bool | None = None):
    """Per-token (log p(target), entropy) under softmax(hidden·w / temperature), float32, shaped like
    `targets`; masked tokens (mask == 0) give 0 and zero gradient. Differentiable w.r.t. hidden and w.

    hidden [..., D] (bf16/fp32), w [D, V], targets int [...], mask bool/float [...] (nonzero = valid).
    block_* override the tile sizes (pallas: rounded down to powers of two); interpret defaults to True
    off GPU for the pallas path.
    """
    if hidden.ndim < 1 or w.ndim != 2 or hidden.shape[-1] != w.shape[0]:
        raise ValueError(f"token_logprob_entropy: hidden {hidden.shape} must be [..., D] and w {w.shape} "
                         "[D, V] with the same D")
    if targets.shape != hidden.shape[:-1] or mask.shape != targets.shape:
        raise ValueError(f"token_logprob_entropy: targets {targets.shape} and mask {mask.shape} must equal "
                         f"hidden's leading shape {hidden.shape[:-1]}")
    if not (jnp.issubdtype(hidden.dtype, jnp.floating) and jnp.issubdtype(w.dtype, jnp.floating)):
        raise ValueError(f"token_logprob_entropy: hidden ({hidden.dtype}) and w ({w.dtype}) must be floating")
    if not jnp.issubdtype(targets.dtype, jnp.integer):
        raise ValueError(f"token_logprob_entropy: targets must be integer ids, got {targets.dtype}")
    if not temperature > 0:
        raise ValueError(f"token_logprob_entropy: temperature must be > 0, got {temperature}")
    impl = resolve_impl(impl)
    if impl == "reference":
        return token_logprob_entropy_ref(hidden, w, targets, mask, temperature=temperature)

    d, v = w.shape
    h = hidden.reshape(-1, d).astype(w.dtype)
    tgt = targets.reshape(-1).astype(jnp.int32)
    valid = mask.reshape(-1) != 0
    n = tgt.shape[0]
    rows, vocab, dchunk = _DEFAULT_BLOCKS[impl]
    rows, vocab, dchunk = block_rows or rows, block_vocab or vocab, block_d or dchunk
    if impl == "pallas":
        bn = min(_pow2_floor(rows), 1 << max(n - 1, 0).bit_length())
        bv, bd = min(_pow2_floor(vocab), _pow2_floor(v)), min(_pow2_floor(dchunk), d & -d)
        if interpret is None:
            interpret = jax.default_backend() not in ("gpu", "cuda", "rocm")
    else:
        bn, bv, bd, interpret = max(1, min(rows if block_rows else chunked_block_rows(n), n)), min(vocab, v), d, False
    cfg = _Cfg(impl, 1.0 / float(temperature), bn, bv, bd, bool(interpret))

    n_pad = -(-max(n, 1) // bn) * bn
    order = (jnp.argsort(jnp.logical_not(valid), stable=True) if compact else jnp.arange(n)).astype(jnp.int32)
    # padded rows are zero rows of their own (masked): perm is a permutation of n_pad rows, so the gather's gradient
    # is a scatter with unique indices (a bf16 scatter-add with repeated indices is a compare-and-swap loop per
    # element on a GPU: benchmarks/gpu_aot.py scatter_facts)
    perm = jnp.concatenate([order, jnp.arange(n, n_pad, dtype=jnp.int32)])
    valid_p = jnp.pad(valid[order], (0, n_pad - n))
    h_p = jnp.pad(h, ((0, n_pad - n), (0, 0)))
    rows = h_p.at[perm].get(unique_indices=True, indices_are_sorted=not compact)
    logp, ent = _core(cfg)(rows, w, jnp.where(valid_p, jnp.pad(tgt, (0, n_pad - n))[perm], -1), valid_p.astype(_F32))
    if compact:
        inv = jnp.zeros((n,), jnp.int32).at[order].set(jnp.arange(n, dtype=jnp.int32), unique_indices=True)
        logp, ent = logp.at[inv].get(unique_indices=True), ent.at[inv].get(unique_indices=True)
    else:
        logp, ent = logp[:n], ent[:n]
    return logp.reshape(targets.shape), ent.reshape(targets.shape)
