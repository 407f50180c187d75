"""Policy-gradient surrogates with fused masking and custom VJPs: Memory-R2 step-level, DAPO token-level.

Owns `step_ratio_loss(logp, old_logp, advantages, mask, segment_ids, *, num_segments, clip_low, clip_high,
dual_clip, log_ratio_clamp, log_ratio_clamp_mode, impl)` -> (loss, metrics): tokens grouped into steps by
`segment_ids`, one length-normalised ratio and mean advantage per step, the dual-clip surrogate per step, the mean
over steps with a valid token; and `token_clip_surrogate(...)` -> (per_token_loss, indicators, metrics): the same
surrogate per token (DAPO clip-higher), aggregation left to the caller (memjax/rl/losses.py). Each custom VJP
saves one coefficient per step or token. Formulas and sources: docs/trainer.md, "Losses".
Segment reductions: "xla" (segment_sum / gather; the default and "auto"), "pallas" (one-hot tile kernels that skip
token blocks whose step-id range misses the segment block), "reference" (memjax.kernels.reference, autodiff).
Invariants: all inputs share one shape (any rank); logp / old_logp / advantages are cast to float32; only logp is
differentiated and a clamped step gets no gradient through its ratio; metrics and indicators carry no gradient;
mask is a validity mask, not a weight; segment ids < 0, >= num_segments or masked belong to no step. Nothing is
donated.
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl

from .reference import CLAMP_MODES, step_ratio_loss_ref

__all__ = ["step_ratio_loss", "token_clip_surrogate", "STEP_IMPLS"]

STEP_IMPLS = ("auto", "xla", "pallas", "reference")
_F32 = jnp.float32
_BIG = jnp.iinfo(jnp.int32).max


@dataclasses.dataclass(frozen=True)
class _StepCfg:
    num_segments: int
    clip_low: float
    clip_high: float
    dual_clip: float | None
    clamp: float
    one_sided: bool
    impl: str
    bt: int
    bs: int
    interpret: bool


def _check(fn: str, logp, others: dict, clip_low, clip_high, dual_clip, clamp, mode: str = "both"):
    if mode not in CLAMP_MODES:
        raise ValueError(f"{fn}: log_ratio_clamp_mode must be one of {CLAMP_MODES}, got {mode!r}")
    for name, x in others.items():
        if x.shape != logp.shape:
            raise ValueError(f"{fn}: {name} has shape {x.shape}, expected logp's shape {logp.shape}")
    for name, x in (("logp", logp), ("old_logp", others["old_logp"]), ("advantages", others["advantages"])):
        if not jnp.issubdtype(x.dtype, jnp.floating):
            raise ValueError(f"{fn}: {name} must be floating, got {x.dtype}")
    if not (0 <= clip_low < 1 and clip_high >= 0):
        raise ValueError(f"{fn}: need 0 <= clip_low < 1 and clip_high >= 0, got {clip_low}, {clip_high}")
    if dual_clip is not None and not dual_clip > 1:
        raise ValueError(f"{fn}: dual_clip must be > 1 (or None), got {dual_clip}")
    if not clamp > 0:
        raise ValueError(f"{fn}: log_ratio_clamp must be > 0, got {clamp}")


def _surrogate_and_grad(rho, adv, clip_low, clip_high, dual_clip):
    """(loss, d loss / d rho, clipped, dual_clipped), elementwise; matches autodiff of the reference."""
    pg1 = -adv * rho
    pg2 = -adv * jnp.clip(rho, 1.0 - clip_low, 1.0 + clip_high)
    clip1 = jnp.maximum(pg1, pg2)
    clipped = pg2 > pg1  # the clipped branch is active: rho is outside the range, zero gradient
    d = jnp.where(clipped, 0.0, -adv)
    if dual_clip is None:
        return clip1, d, clipped, jnp.zeros_like(clipped)
    pg3 = -adv * dual_clip
    dual = (adv < 0) & (clip1 > pg3)
    return jnp.where(adv < 0, jnp.minimum(pg3, clip1), clip1), jnp.where(dual, 0.0, d), clipped, dual


def _fractions(w, adv, rho, log_ratio, clipped, dual) -> dict:
    count = jnp.sum(w)
    mean = lambda x: jnp.sum(jnp.where(w > 0, x, 0.0)) / jnp.maximum(count, 1.0)  # noqa: E731
    return {"clipfrac": mean(clipped), "clipfrac_high": mean(clipped & (adv > 0)),
            "clipfrac_low": mean(clipped & (adv < 0)), "clipfrac_dual": mean(dual),
            "ratio_mean": mean(rho), "approx_kl": mean(-log_ratio), "count": count}


# ---- segment reductions: xla and pallas ----

def _block_ranges(seg, bt):
    sb = seg.reshape(-1, bt)
    return jnp.min(jnp.where(sb >= 0, sb, _BIG), axis=1), jnp.max(sb, axis=1)


def _segsum_kernel(lo_ref, hi_ref, seg_ref, vals_ref, out_ref, *, bt, bs, nt, k):
    s0 = pl.program_id(0) * bs
    ids = s0 + lax.broadcasted_iota(jnp.int32, (1, bs), 1)

    def body(b, acc):
        def add(acc):
            t0 = pl.multiple_of(b * bt, bt)
            hit = seg_ref[pl.ds(t0, bt)][:, None] == ids
            return tuple(a + jnp.sum(jnp.where(hit, vals_ref[r, pl.ds(t0, bt)][:, None], 0.0), axis=0)
                         for r, a in enumerate(acc))
        return lax.cond((hi_ref[b] >= s0) & (lo_ref[b] < s0 + bs), add, lambda a: a, acc)

    acc = lax.fori_loop(0, nt, body, tuple(jnp.zeros((bs,), _F32) for _ in range(k)))
    for r in range(k):
        out_ref[r, :] = acc[r]


def _gather_kernel(lo_ref, hi_ref, seg_ref, coef_ref, out_ref, *, bt, bs, ns):
    i = pl.program_id(0)
    lo, hi, seg = lo_ref[i], hi_ref[i], seg_ref[...]

    def body(jb, acc):
        s0 = pl.multiple_of(jb * bs, bs)

        def add(acc):
            ids = s0 + lax.broadcasted_iota(jnp.int32, (1, bs), 1)
            c = coef_ref[pl.ds(s0, bs)]
            return acc + jnp.sum(jnp.where(seg[:, None] == ids, c[None, :], 0.0), axis=1)
        return lax.cond((hi >= s0) & (lo < s0 + bs), add, lambda a: a, acc)

    out_ref[...] = lax.fori_loop(0, ns, body, jnp.zeros((bt,), _F32))


def _segment_sums(cfg: _StepCfg, vals, seg):
    """vals [K, N] float32, seg [N] int32 (-1 = none) -> [K, num_segments] sums."""
    s = cfg.num_segments
    if cfg.impl != "pallas":
        ids = jnp.where(seg < 0, s, seg)
        return jax.ops.segment_sum(vals.T, ids, s + 1)[:s].T
    k, n = vals.shape
    bt, bs = cfg.bt, cfg.bs
    n_pad, s_pad = pl.cdiv(n, bt) * bt, pl.cdiv(s, bs) * bs
    seg_p = jnp.pad(seg, (0, n_pad - n), constant_values=-1)
    vals_p = jnp.pad(vals, ((0, 0), (0, n_pad - n)))
    lo, hi = _block_ranges(seg_p, bt)
    full = lambda a: pl.BlockSpec(a.shape, lambda j: (0,) * a.ndim)  # noqa: E731
    out = pl.pallas_call(
        functools.partial(_segsum_kernel, bt=bt, bs=bs, nt=n_pad // bt, k=k), grid=(s_pad // bs,),
        in_specs=[full(lo), full(hi), full(seg_p), full(vals_p)],
        out_specs=pl.BlockSpec((k, bs), lambda j: (0, j)), out_shape=jax.ShapeDtypeStruct((k, s_pad), _F32),
        interpret=cfg.interpret, name="segment_sums")(lo, hi, seg_p, vals_p)
    return out[:, :s]


def _segment_gather(cfg: _StepCfg, coef, seg):
    """coef [num_segments] -> per token coef[seg] (0 where seg < 0)."""
    if cfg.impl != "pallas":
        return jnp.concatenate([coef, jnp.zeros((1,), _F32)])[jnp.where(seg < 0, cfg.num_segments, seg)]
    n, s = seg.shape[0], cfg.num_segments
    bt, bs = cfg.bt, cfg.bs
    n_pad, s_pad = pl.cdiv(n, bt) * bt, pl.cdiv(s, bs) * bs
    seg_p = jnp.pad(seg, (0, n_pad - n), constant_values=-1)
    coef_p = jnp.pad(coef, (0, s_pad - s))
    lo, hi = _block_ranges(seg_p, bt)
    full = lambda a: pl.BlockSpec(a.shape, lambda i: (0,) * a.ndim)  # noqa: E731
    out = pl.pallas_call(
        functools.partial(_gather_kernel, bt=bt, bs=bs, ns=s_pad // bs), grid=(n_pad // bt,),
        in_specs=[full(lo), full(hi), pl.BlockSpec((bt,), lambda i: (i,)), full(coef_p)],
        out_specs=pl.BlockSpec((bt,), lambda i: (i,)), out_shape=jax.ShapeDtypeStruct((n_pad,), _F32),
        interpret=cfg.interpret, name="segment_gather")(lo, hi, seg_p, coef_p)
    return out[:n]


# ---- step-level loss ----

def _step_forward(cfg: _StepCfg, logp, old, adv, wt, seg):
    on = wt > 0
    n, slr, sa = _segment_sums(cfg, jnp.stack([wt, jnp.where(on, logp - old, 0.0), jnp.where(on, adv, 0.0)]),
                               seg)
    denom = jnp.maximum(n, 1.0)
    log_ratio, adv_u = slr / denom, sa / denom
    lo = -jnp.inf if cfg.one_sided else -cfg.clamp
    rho = jnp.exp(jnp.clip(log_ratio, lo, cfg.clamp))
    per_step, d_rho, clipped, dual = _surrogate_and_grad(rho, adv_u, cfg.clip_low, cfg.clip_high,
                                                         cfg.dual_clip)
    step_valid = n > 0
    n_steps = jnp.maximum(jnp.sum(step_valid), 1).astype(_F32)
    loss = jnp.sum(jnp.where(step_valid, per_step, 0.0)) / n_steps
    live = step_valid & (log_ratio < cfg.clamp) & (log_ratio > lo)
    coef = jnp.where(live, d_rho * rho / (denom * n_steps), 0.0)
    stats = (step_valid.astype(_F32), adv_u, rho, log_ratio, clipped.astype(_F32), dual.astype(_F32))
    return loss, stats, coef


@functools.lru_cache(maxsize=None)
def _step_core(cfg: _StepCfg):
    @jax.custom_vjp
    def core(logp, old, adv, wt, seg):
        loss, stats, _ = _step_forward(cfg, logp, old, adv, wt, seg)
        return loss, stats

    def fwd(logp, old, adv, wt, seg):
        loss, stats, coef = _step_forward(cfg, logp, old, adv, wt, seg)
        return (loss, stats), (coef, wt, seg)

    def bwd(res, g):
        coef, wt, seg = res
        return _segment_gather(cfg, coef, seg) * wt * g[0], None, None, None, None

    core.defvjp(fwd, bwd)
    return core


def step_ratio_loss(logp, old_logp, advantages, mask, segment_ids, *, num_segments: int, clip_low: float,
                    clip_high: float, dual_clip: float | None = None, log_ratio_clamp: float = 20.0,
                    log_ratio_clamp_mode: str = "both", impl: str = "auto", block_tokens: int = 256,
                    block_segments: int = 128,
                    interpret: bool | None = None):
    """Memory-R2 step-level dual-clip loss (scalar float32) and metrics over valid steps: clipfrac
    (verl's pg_clipfrac), clipfrac_high (A>0, rho>1+eps_h), clipfrac_low (A<0, rho<1-eps_l), clipfrac_dual
    (verl's pg_clipfrac_lower), ratio_mean, approx_kl (mean of -log ratio), num_steps."""
    fn = "step_ratio_loss"
    _check(fn, logp, {"old_logp": old_logp, "advantages": advantages, "mask": mask,
                      "segment_ids": segment_ids}, clip_low, clip_high, dual_clip, log_ratio_clamp,
           log_ratio_clamp_mode)
    if not jnp.issubdtype(segment_ids.dtype, jnp.integer):
        raise ValueError(f"{fn}: segment_ids must be integer, got {segment_ids.dtype}")
    if not (isinstance(num_segments, int) and num_segments >= 1):
        raise ValueError(f"{fn}: num_segments must be a static int >= 1, got {num_segments!r}")
    if impl not in STEP_IMPLS:
        raise ValueError(f"{fn}: impl must be one of {STEP_IMPLS}, got {impl!r}")
    impl = "xla" if impl == "auto" else impl
    if interpret is None:
        interpret = jax.default_backend() not in ("gpu", "cuda", "rocm")
    bt = 1 << (max(block_tokens, 1).bit_length() - 1)
    bs = 1 << (max(block_segments, 1).bit_length() - 1)
    cfg = _StepCfg(num_segments, float(clip_low), float(clip_high),
                   None if dual_clip is None else float(dual_clip), float(log_ratio_clamp),
                   log_ratio_clamp_mode == "upper", impl, bt, bs, bool(interpret))

    f32 = lambda x: x.reshape(-1).astype(_F32)  # noqa: E731
    seg = segment_ids.reshape(-1).astype(jnp.int32)
    valid = (mask.reshape(-1) != 0) & (seg >= 0) & (seg < num_segments)
    seg = jnp.where(valid, seg, -1)
    wt = valid.astype(_F32)
    if impl == "reference":
        loss = step_ratio_loss_ref(logp, old_logp, advantages, mask, segment_ids, num_segments=num_segments,
                                   clip_low=clip_low, clip_high=clip_high, dual_clip=dual_clip,
                                   log_ratio_clamp=log_ratio_clamp, log_ratio_clamp_mode=log_ratio_clamp_mode)
        _, stats, _ = _step_forward(dataclasses.replace(cfg, impl="xla"), lax.stop_gradient(f32(logp)),
                                    f32(old_logp), f32(advantages), wt, seg)
    else:
        loss, stats = _step_core(cfg)(f32(logp), f32(old_logp), f32(advantages), wt, seg)
    step_valid, adv_u, rho, log_ratio, clipped, dual = lax.stop_gradient(stats)
    metrics = _fractions(step_valid, adv_u, rho, log_ratio, clipped > 0, dual > 0)
    metrics["num_steps"] = metrics.pop("count")
    return loss, metrics


# ---- token-level surrogate ----

@functools.lru_cache(maxsize=None)
def _token_core(clip_low: float, clip_high: float, dual_clip: float | None, clamp: float, one_sided: bool):
    lo = -jnp.inf if one_sided else -clamp

    def terms(logp, old, adv, wt):
        log_ratio = logp - old
        rho = jnp.exp(jnp.clip(log_ratio, lo, clamp))
        per_tok, d_rho, _, _ = _surrogate_and_grad(rho, adv, clip_low, clip_high, dual_clip)
        on = wt > 0
        return jnp.where(on, per_tok, 0.0), jnp.where(on & (log_ratio < clamp) & (log_ratio > lo), d_rho * rho, 0.0)

    @jax.custom_vjp
    def core(logp, old, adv, wt):
        return terms(logp, old, adv, wt)[0]

    def fwd(logp, old, adv, wt):
        loss, coef = terms(logp, old, adv, wt)
        return loss, coef

    def bwd(coef, g):
        return g * coef, None, None, None

    core.defvjp(fwd, bwd)
    return core


def token_clip_surrogate(logp, old_logp, advantages, mask, *, clip_low: float, clip_high: float,
                         dual_clip: float | None = None, log_ratio_clamp: float = 20.0,
                         log_ratio_clamp_mode: str = "both"):
    """Per-token dual-clip surrogate (float32, logp's shape, masked tokens 0), per-token indicators
    {"ratio", "clipped_high", "clipped_low", "clipped_dual"} (False on masked tokens) and masked-mean
    metrics {clipfrac, clipfrac_high, clipfrac_low, clipfrac_dual, ratio_mean, approx_kl, num_tokens}."""
    fn = "token_clip_surrogate"
    _check(fn, logp, {"old_logp": old_logp, "advantages": advantages, "mask": mask}, clip_low, clip_high,
           dual_clip, log_ratio_clamp, log_ratio_clamp_mode)
    cl, ch = float(clip_low), float(clip_high)
    dc, clamp = None if dual_clip is None else float(dual_clip), float(log_ratio_clamp)
    logp32, old, adv = (x.astype(_F32) for x in (logp, old_logp, advantages))
    valid = mask != 0
    wt = valid.astype(_F32)
    one_sided = log_ratio_clamp_mode == "upper"
    loss = _token_core(cl, ch, dc, clamp, one_sided)(logp32, old, adv, wt)

    log_ratio = lax.stop_gradient(logp32) - old
    rho = jnp.exp(jnp.clip(log_ratio, -jnp.inf if one_sided else -clamp, clamp))
    _, _, clipped, dual = _surrogate_and_grad(rho, adv, cl, ch, dc)
    indicators = {"ratio": jnp.where(valid, rho, 0.0), "clipped_high": valid & clipped & (adv > 0),
                  "clipped_low": valid & clipped & (adv < 0), "clipped_dual": valid & dual}
    metrics = _fractions(wt, adv, rho, log_ratio, clipped, dual)
    metrics["num_tokens"] = metrics.pop("count")
    return loss, indicators, metrics
