"""Token sampling for the engine: greedy, temperature, top-k and top-p, with no vocabulary sort.

Owns: `sample(logits, temperature, top_p, top_k, seeds, positions)` for a batch of rows.
Invariants:
- Temperature > 0 samples by Gumbel-max: argmax(logits / T + Gumbel noise) over the allowed tokens.
- top-k and top-p are thresholds found by bisection (a fixed number of halvings of [min, max] logit),
  never by sorting the vocabulary: top-k keeps the tokens whose logit is >= the k-th largest (ties may
  keep a few more); top-p keeps the smallest set of most-probable tokens whose mass reaches p (as a
  probability threshold; ties at the threshold are kept, so the kept mass is >= p).
- The PRNG key of a sampled token is fold_in(key(seed), position): a request's sample depends only on
  its own seed and position, not on its batch neighbours, and is reproduced exactly after preemption.
- The returned log-prob is log_softmax(logits / T)[token] over the full vocabulary, before top-k/top-p
  truncation (T = 1 when greedy), as verl does; rows with processed=True instead get the log-prob under
  the truncated, renormalised distribution sampled from: logits/T [token] - logsumexp over the allowed
  set (`processed_logprob`; greedy rows ignore truncation, so theirs is the raw value). The trainer
  recomputes either with the same functions (memjax.rl.logprobs).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

_BISECT_STEPS = 32


def _bisect_threshold(x: jax.Array, ok, steps: int = _BISECT_STEPS) -> jax.Array:
    """Largest threshold tau in [min(x), max(x)] per row with ok(x >= tau) true (ok monotone, true at min)."""
    lo, hi = x.min(-1), x.max(-1)

    def body(_, c):
        lo, hi = c
        mid = 0.5 * (lo + hi)
        good = ok(x >= mid[:, None])
        return jnp.where(good, mid, lo), jnp.where(good, hi, mid)

    lo, hi = jax.lax.fori_loop(0, steps, body, (lo, hi))
    return jnp.where(ok(x >= hi[:, None]), hi, lo)


def allowed_mask(scaled: jax.Array, top_p: jax.Array, top_k: jax.Array) -> jax.Array:
    """scaled logits [b, V] (already / T) -> bool [b, V] of tokens inside top-k and the top-p nucleus."""
    k = jnp.where(top_k > 0, top_k, scaled.shape[-1])
    tau_k = _bisect_threshold(scaled, lambda m: m.sum(-1) >= k)
    keep = scaled >= tau_k[:, None]
    probs = jax.nn.softmax(jnp.where(keep, scaled, -jnp.inf), axis=-1)
    tau_p = _bisect_threshold(probs, lambda m: jnp.where(m, probs, 0.0).sum(-1) >= top_p * (1 - 1e-6))
    nucleus = probs >= tau_p[:, None]
    return keep & jnp.where((top_p < 1.0)[:, None], nucleus, True)


def processed_logprob(scaled: jax.Array, allowed: jax.Array, token: jax.Array) -> jax.Array:
    """scaled logits [..., V], allowed bool [..., V], token int [...] -> log-prob of token under
    softmax(scaled) restricted to the allowed set (f32 [...])."""
    lse = jax.nn.logsumexp(jnp.where(allowed, scaled, -jnp.inf), axis=-1)
    return jnp.take_along_axis(scaled, token[..., None], axis=-1)[..., 0] - lse


def sample(logits: jax.Array, temperature: jax.Array, top_p: jax.Array, top_k: jax.Array,
           seeds: jax.Array, positions: jax.Array, processed: jax.Array | None = None
           ) -> tuple[jax.Array, jax.Array]:
    """logits f32 [b, V]; per-row temperature/top_p f32 [b], top_k/seeds/positions int32 [b];
    processed bool [b] (None = all raw).

    Returns (token int32 [b], logprob f32 [b]).
    """
    logits = logits.astype(jnp.float32)
    greedy = temperature <= 0
    t = jnp.where(greedy, 1.0, temperature)
    scaled = logits / t[:, None]
    lse_raw = jax.nn.logsumexp(scaled, axis=-1)
    needs_mask = jnp.any((top_p < 1.0) | (top_k > 0))
    allowed = jax.lax.cond(needs_mask, lambda: allowed_mask(scaled, top_p, top_k),
                           lambda: jnp.ones(scaled.shape, bool))

    def gumbel(seed, pos):
        key = jax.random.fold_in(jax.random.key(seed.astype(jnp.uint32)), pos)
        return jax.random.gumbel(key, (logits.shape[-1],), jnp.float32)

    # an all-greedy batch (the common evaluation case) draws no noise: a [b, V] Gumbel draw costs as much as
    # the rest of the sampler together on CPU
    noisy = jax.lax.cond(jnp.all(greedy), lambda: scaled,
                         lambda: jnp.where(greedy[:, None], scaled, scaled + jax.vmap(gumbel)(seeds, positions)))
    token = jnp.argmax(jnp.where(allowed | greedy[:, None], noisy, -jnp.inf), axis=-1).astype(jnp.int32)
    raw = jnp.take_along_axis(scaled, token[:, None], axis=-1)[:, 0] - lse_raw
    if processed is None:
        return token, raw
    proc = jax.lax.cond(needs_mask & (processed & ~greedy).any(),
                        lambda: processed_logprob(scaled, allowed, token), lambda: raw)
    return token, jnp.where(processed & ~greedy, proc, raw)
