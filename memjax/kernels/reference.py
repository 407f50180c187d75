"""Pure-JAX references for the kernels in `memjax.kernels` (the specification the kernels are tested against).

Owns the dense, autodiff-only definitions: `token_logprob_entropy_ref` (full [N, V] float32 logits),
`dual_clip_surrogate` (verl's `compute_policy_loss` formula), `clamp_log_ratio`, `step_ratio_loss_ref` (Memory-R2's
length-normalised step-level ratio loss via `jax.ops.segment_sum`), `token_clip_surrogate_ref` (DAPO clip-higher
per token) and `paged_attention_ref` (the engine's attention over a paged KV cache, page by page with an online
softmax; layout in memjax/engine/paged_kv.py; the engine runs it by default off GPU). docs/trainer.md, "Losses",
has the loss formulas with their sources.
Invariants: inputs are never donated or modified; masks are validity masks (nonzero = valid), not weights;
segment ids < 0 or >= num_segments belong to no step; query rows with no visible key return zeros.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from einops import rearrange

CLAMP_MODES = ("both", "upper")  # log-ratio clamp: two-sided, or upper bound only (Memory-R2's official code)

__all__ = ["CLAMP_MODES", "clamp_log_ratio", "paged_attention_ref", "token_logprob_entropy_ref",
           "dual_clip_surrogate", "step_ratio_loss_ref",
           "token_clip_surrogate_ref"]


def token_logprob_entropy_ref(hidden, w, targets, mask, *, temperature: float = 1.0):
    """Dense [N, V] path: (logp, entropy), float32, shaped like `targets`."""
    d = w.shape[0]
    h = hidden.reshape(-1, d).astype(w.dtype)
    logits = jnp.dot(h, w, preferred_element_type=jnp.float32) / jnp.float32(temperature)
    logz = jax.nn.log_softmax(logits, axis=-1)
    valid = mask.reshape(-1) != 0
    tgt = jnp.where(valid, targets.reshape(-1), 0).astype(jnp.int32)
    logp = jnp.take_along_axis(logz, tgt[:, None], axis=-1)[:, 0]
    ent = -jnp.sum(jnp.exp(logz) * logz, axis=-1)
    shape = targets.shape
    return (jnp.where(valid, logp, 0.0).reshape(shape), jnp.where(valid, ent, 0.0).reshape(shape))


def dual_clip_surrogate(rho, adv, *, clip_low: float, clip_high: float, dual_clip: float | None):
    """verl's dual-clip PPO surrogate, elementwise (loss to minimise).

    max(-A·rho, -A·clip(rho, 1 - clip_low, 1 + clip_high)), and where A < 0 with a dual clip c given,
    min(that, -A·c).
    """
    pg1 = -adv * rho
    pg2 = -adv * jnp.clip(rho, 1.0 - clip_low, 1.0 + clip_high)
    clip1 = jnp.maximum(pg1, pg2)
    if dual_clip is None:
        return clip1
    return jnp.where(adv < 0, jnp.minimum(-adv * dual_clip, clip1), clip1)


def clamp_log_ratio(x, clamp: float, mode: str = "both"):
    """x clipped to [-clamp, clamp] (mode "both") or to (-inf, clamp] (mode "upper")."""
    if mode not in CLAMP_MODES:
        raise ValueError(f"log_ratio_clamp_mode must be one of {CLAMP_MODES}, got {mode!r}")
    return jnp.minimum(x, clamp) if mode == "upper" else jnp.clip(x, -clamp, clamp)


def step_ratio_loss_ref(logp, old_logp, advantages, mask, segment_ids, *, num_segments: int,
                        clip_low: float, clip_high: float, dual_clip: float | None = None,
                        log_ratio_clamp: float = 20.0, log_ratio_clamp_mode: str = "both"):
    """Scalar loss: mean over valid steps of the dual-clip surrogate on length-normalised ratios.

    Per step u: rho_u = exp(clamp(mean_{t in u} (logp - old_logp))), A_u = mean_{t in u} A; the loss is the
    mean of `dual_clip_surrogate(rho_u, A_u)` over steps with at least one valid token (0 if none).
    """
    seg = segment_ids.reshape(-1).astype(jnp.int32)
    valid = (mask.reshape(-1) != 0) & (seg >= 0) & (seg < num_segments)
    seg = jnp.where(valid, seg, num_segments)
    wt = valid.astype(jnp.float32)

    def ssum(x):
        return jax.ops.segment_sum(wt * x.reshape(-1).astype(jnp.float32), seg, num_segments + 1)[:-1]

    n = ssum(jnp.ones_like(wt))
    denom = jnp.maximum(n, 1.0)
    log_ratio = ssum(logp - old_logp) / denom
    adv = ssum(advantages) / denom
    rho = jnp.exp(clamp_log_ratio(log_ratio, log_ratio_clamp, log_ratio_clamp_mode))
    per_step = dual_clip_surrogate(rho, adv, clip_low=clip_low, clip_high=clip_high, dual_clip=dual_clip)
    step_valid = n > 0
    return jnp.sum(jnp.where(step_valid, per_step, 0.0)) / jnp.maximum(jnp.sum(step_valid), 1)


def token_clip_surrogate_ref(logp, old_logp, advantages, mask, *, clip_low: float, clip_high: float,
                             dual_clip: float | None = None, log_ratio_clamp: float = 20.0,
                             log_ratio_clamp_mode: str = "both"):
    """Per-token clipped surrogate, float32, shaped like `logp`; masked tokens 0."""
    log_ratio = (logp - old_logp).astype(jnp.float32)
    rho = jnp.exp(clamp_log_ratio(log_ratio, log_ratio_clamp, log_ratio_clamp_mode))
    per_tok = dual_clip_surrogate(rho, advantages.astype(jnp.float32), clip_low=clip_low,
                                  clip_high=clip_high, dual_clip=dual_clip)
    return jnp.where(mask != 0, per_tok, 0.0)


def page_buckets(max_pages: int) -> tuple[int, ...]:
    """Static page-loop lengths: powers of two below max_pages, then max_pages."""
    sizes, n = [], 1
    while n < max_pages:
        sizes.append(n)
        n *= 2
    return (*sizes, max_pages)


def paged_attention_ref(q: jax.Array, k_pages: jax.Array, v_pages: jax.Array, layer: jax.Array,
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
