"""Token sampling for the engine: greedy, temperature, top-k and top-p, with no vocabulary sort and no
[b, V] random draw.

Owns `sample(...)` for a batch of rows, the truncation set (`allowed_threshold` / `allowed_mask`, `Truncation`,
`search_ways`) and `processed_logprob`, which the trainer recomputes with (memjax.rl.logprobs).
Invariants:
- Work over the vocabulary is a few streaming reductions of the [b, V] logits viewed as [b, nb, blk] blocks,
  never a sort, a [b, V] argmax or a [b, V] noise draw; greedy takes the first maximum (jnp.argmax's tie rule).
- A sampled token's uniform comes from fold_in(key(seed), position): it depends on nothing but its own seed,
  position and logits, and is reproduced exactly after preemption.
- top-k / top-p are one logit threshold per row; ties at the threshold are kept.
- The returned log-prob is log_softmax(logits / T)[token] before truncation (as verl); rows with processed=True
  get it under the truncated, renormalised distribution instead (`processed_logprob`).
docs/engine.md, "The sampler", has the algorithm and its measured speed.
"""

from __future__ import annotations

import dataclasses
import math

import jax
import jax.numpy as jnp

_SEARCH_BITS = 32  # a threshold search narrows its bracket [lo, hi] to (hi - lo) / 2**32 at least
_GPU_WAYS = 15  # thresholds tried per read of the [b, V] values on a GPU: 4 bits a read, 8 reads in all
_SINGLE_BLOCK_MAX = 4096  # vocabularies up to this size are one block


def search_ways(platform: str | None = None) -> int:
    """Thresholds a search tries per read of the [b, V] values on `platform` (default: JAX's default backend):
    15 on a GPU, where a read is the cost (8 reads instead of 32), 1 elsewhere (plain bisection: XLA:CPU pays per
    comparison, ~0.5 ns each, so 15 thresholds a read would cost 4x the comparisons of 32 halvings)."""
    return _GPU_WAYS if (platform or jax.default_backend()) in ("gpu", "cuda", "rocm") else 1


@dataclasses.dataclass(frozen=True)
class Truncation:
    """The truncation pass a compiled sampler runs (`sample(truncate=)`): top_k / top_p False when no sampled row of
    the call has one (the engine decides per call on the host), ways the thresholds tried per read of the logits
    (`search_ways`; None = the default backend's)."""
    top_k: bool = True
    top_p: bool = True
    ways: int | None = None

    def __post_init__(self):
        if self.ways is not None and not (isinstance(self.ways, int) and self.ways >= 1):
            raise ValueError(f"Truncation: ways must be an int >= 1, got {self.ways!r}")

    @property
    def any(self) -> bool:
        return self.top_k or self.top_p

    @property
    def resolved_ways(self) -> int:
        return self.ways or search_ways()


def search_passes(ways: int) -> int:
    """Reads of the values a `ways`-way search makes: each narrows the bracket (ways + 1)-fold."""
    return math.ceil(_SEARCH_BITS / math.log2(ways + 1))


def vocab_block(v: int) -> int:
    """Block length for the two-stage reductions over a v-token vocabulary: v itself when small, else the
    smallest divisor of v >= sqrt(v) (at most 128 blocks of >= 1187 for Qwen2.5's 151,936 and 152,064 tokens),
    else 1024 with padding when that divisor is over 16 sqrt(v) (a prime v)."""
    if v <= _SINGLE_BLOCK_MAX:
        return v
    r = math.isqrt(v)
    best = min(d for i in range(1, r + 1) if v % i == 0 for d in (i, v // i) if d >= r)
    return best if best <= 16 * r else 1024


def vocab_blocks(x: jax.Array) -> jax.Array:
    """[b, V] -> [b, nb, blk] (a reshape; padded with -inf at the end when blk does not divide V)."""
    b, v = x.shape
    blk = vocab_block(v)
    nb = -(-v // blk)
    if nb * blk != v:
        x = jnp.pad(x, ((0, 0), (0, nb * blk - v)), constant_values=-jnp.inf)
    return x.reshape(b, nb, blk)


def _pick_block(xb: jax.Array, j: jax.Array) -> jax.Array:
    """xb [b, nb, blk], j int [b] -> [b, blk] (block j of each row)."""
    return jnp.take_along_axis(xb, j[:, None, None], axis=1)[:, 0]


def block_argmax(x: jax.Array) -> jax.Array:
    """int32 [b]: jnp.argmax(x, -1) of x [b, V] (the first maximum), in two stages. A row holding NaN gets some
    index in [0, V) (XLA:CPU's max reduction may skip NaN)."""
    xb = vocab_blocks(x)
    j = jnp.argmax(xb.max(-1), -1)
    return (j * xb.shape[-1] + jnp.argmax(_pick_block(xb, j), -1)).astype(jnp.int32)


def _search(lo: jax.Array, hi: jax.Array, ok, ways: int) -> jax.Array:
    """f32 [b]: per row the largest threshold of the search's grid in [lo, hi) with ok, to (hi - lo) / 2**32 or
    finer. ok(t f32 [b, w]) -> bool [b, w] is monotone in t (true up to some t*, false above), true at lo, false at
    hi. Each pass tries `ways` evenly spaced thresholds inside the bracket at once (one read of the values) and keeps
    the part between the largest that passes and the smallest that fails; the passes are unrolled when there are 8
    or fewer (no loop counter or carry copies on a GPU)."""
    frac = jnp.arange(1, ways + 1, dtype=jnp.float32) / (ways + 1)

    def body(_, c):
        lo, hi = c
        t = lo[:, None] + (hi - lo)[:, None] * frac
        good = ok(t)
        return (jnp.maximum(lo, jnp.where(good, t, -jnp.inf).max(-1)),
                jnp.minimum(hi, jnp.where(good, jnp.inf, t).min(-1)))

    passes = search_passes(ways)
    return jax.lax.fori_loop(0, passes, body, (lo, hi), unroll=passes <= 8)[0]


def allowed_threshold(scaled: jax.Array, top_p: jax.Array, top_k: jax.Array,
                      truncation: Truncation | None = None, row_max: jax.Array | None = None) -> jax.Array:
    """scaled logits [b, V] (already / T) -> f32 [b]: the allowed set of top-k and the top-p nucleus is
    {scaled >= threshold}. truncation (default: both, the backend's ways): a search switched off ignores its
    argument (the caller knows that no row has one). top-k: the largest grid threshold that keeps >= k tokens.
    top-p, within the top-k set: e = exp(scaled - max) there (0 outside, materialised once), the largest grid
    threshold on e whose kept mass reaches top_p * sum(e) (up to 1e-6), then the smallest logit it keeps (the
    probability is monotone in the logit, so the nucleus is a logit threshold too). row_max: scaled.max(-1) where
    the caller has it (one read of the values fewer)."""
    tr = truncation or Truncation()
    ways = tr.resolved_ways
    hi = scaled.max(-1) if row_max is None else row_max
    tau_k = jnp.full_like(hi, -jnp.inf)  # the whole vocabulary
    if tr.top_k:
        lo = scaled.min(-1)
        k = jnp.where(top_k > 0, top_k, scaled.shape[-1])
        count = lambda t: (scaled[:, :, None] >= t[:, None, :]).sum(1)  # one fusion; no [b, V, w] buffer (H100 HLO)
        tau_k = _search(lo, jnp.nextafter(hi, jnp.inf), lambda t: count(t) >= k[:, None], ways)
    if not tr.top_p:
        return tau_k
    keep = scaled >= tau_k[:, None]
    e = jnp.where(keep, jnp.exp(scaled - hi[:, None]), 0.0)  # in [0, 1], 1 at the maximum
    target = top_p * (1 - 1e-6) * e.sum(-1)
    mass = lambda t: jnp.where(e[:, :, None] >= t[:, None, :], e[:, :, None], 0.0).sum(1)
    tau_e = _search(jnp.zeros_like(hi), jnp.full_like(hi, jnp.nextafter(jnp.float32(1), jnp.float32(2))),
                    lambda t: mass(t) >= target[:, None], ways)
    nucleus_min = jnp.where(keep & (e >= tau_e[:, None]), scaled, jnp.inf).min(-1)
    return jnp.where(top_p < 1.0, nucleus_min, tau_k)


def allowed_mask(scaled: jax.Array, top_p: jax.Array, top_k: jax.Array,
                 truncation: Truncation | None = None) -> jax.Array:
    """scaled logits [b, V] (already / T) -> bool [b, V] of tokens inside top-k and the top-p nucleus."""
    return scaled >= allowed_threshold(scaled, top_p, top_k, truncation)[:, None]


def processed_logprob(scaled: jax.Array, allowed: jax.Array, token: jax.Array) -> jax.Array:
    """scaled logits [..., V], allowed bool [..., V], token int [...] -> log-prob of token under
    softmax(scaled) restricted to the allowed set (f32 [...])."""
    lse = jax.nn.logsumexp(jnp.where(allowed, scaled, -jnp.inf), axis=-1)
    return jnp.take_along_axis(scaled, token[..., None], axis=-1)[..., 0] - lse


def _last_positive(x: jax.Array) -> jax.Array:
    """int32 [b]: index of the last x[b, i] > 0 (0 when none)."""
    n = x.shape[-1]
    return (n - 1 - jnp.argmax(x[:, ::-1] > 0, axis=-1)).astype(jnp.int32)


def sample(logits: jax.Array, temperature: jax.Array, top_p: jax.Array, top_k: jax.Array,
           seeds: jax.Array, positions: jax.Array, processed: jax.Array | None = None,
           truncate: bool | Truncation | None = None) -> tuple[jax.Array, jax.Array]:
    """logits f32 [b, V]; per-row temperature/top_p f32 [b], top_k/seeds/positions int32 [b];
    processed bool [b] (None = all raw). truncate: None = decide on the device whether any sampled row has a top-p
    or top-k (one `lax.cond`); True = compute both thresholds unconditionally (rows without either keep the whole
    vocabulary: the threshold is then their smallest logit); False = the caller knows that no sampled row has
    either (no truncation pass, no branch); a `Truncation` = only the searches it names (the caller knows that no
    sampled row has the others), with its ways. The engine decides per device call (memjax/engine/engine.py).

    Returns (token int32 [b], logprob f32 [b]).
    """
    logits = logits.astype(jnp.float32)  # the LM head's output: every pass below is a reduction over it
    b = logits.shape[0]
    greedy = temperature <= 0
    inv_t = 1.0 / jnp.where(greedy, 1.0, temperature)[:, None, None]  # no [b, V] `logits / T` is materialised
    xb = vocab_blocks(logits)  # [b, nb, blk] view (a bitcast when blk divides V)
    blk = xb.shape[-1]
    bmax = xb.max(-1)  # [b, nb] raw block maxima
    m = bmax.max(-1) * inv_t[:, 0, 0]  # = max(logits / T): scaling by 1 / T > 0 is monotone
    m = jnp.where(jnp.isfinite(m), m, 0.0)
    exp = lambda: jnp.exp(xb * inv_t - m[:, None, None])  # fused into each reduction, never materialised
    # [b, nb] softmax mass of each block (before truncation); the barrier keeps XLA from also reducing the exp
    # straight to [b] for the log-normaliser, which would give it two consumers and materialise it
    z_raw = jax.lax.optimization_barrier(exp().sum(-1))

    tr = truncate if isinstance(truncate, Truncation) else Truncation()

    def truncated():  # the threshold, and the block masses inside the allowed set
        tau = allowed_threshold(logits * inv_t[:, 0], top_p, top_k, tr, row_max=m)
        return tau, jnp.where(xb * inv_t >= tau[:, None, None], exp(), 0.0).sum(-1)

    untruncated = lambda: (jnp.full((b,), -jnp.inf, jnp.float32), z_raw)
    if truncate is None:  # one branch decision for both (on a GPU a `lax.cond` reads its predicate back to the host)
        masked = jnp.any(((top_p < 1.0) | (top_k > 0)) & ~greedy)
        tau, z_ok = jax.lax.cond(masked, truncated, untruncated)
    else:
        tau, z_ok = truncated() if truncate and tr.any else untruncated()

    # greedy: first maximum of the raw logits (block of the maximum, then its first index)
    jg = jnp.argmax(bmax, -1)
    tok_greedy = jg * blk + jnp.argmax(_pick_block(xb, jg), -1)

    # sampled: invert the CDF of the allowed mass, block first, then inside the block
    u = jax.vmap(lambda s, p: jax.random.uniform(jax.random.fold_in(jax.random.key(s.astype(jnp.uint32)), p)))(
        seeds, positions)
    cum = jnp.cumsum(z_ok, -1)
    target = u * cum[:, -1]
    j = jnp.minimum((cum <= target[:, None]).sum(-1), _last_positive(z_ok))
    before = jnp.where(j > 0, jnp.take_along_axis(cum, jnp.maximum(j - 1, 0)[:, None], -1)[:, 0], 0.0)
    row = _pick_block(xb, j) * inv_t[:, 0]
    row_e = jnp.where(row >= tau[:, None], jnp.exp(row - m[:, None]), 0.0)
    k = jnp.minimum((jnp.cumsum(row_e, -1) <= (target - before)[:, None]).sum(-1), _last_positive(row_e))
    tok_sampled = j * blk + k

    token = jnp.where(greedy, tok_greedy, tok_sampled).astype(jnp.int32)
    s_tok = jnp.take_along_axis(logits, token[:, None], axis=-1)[:, 0] * inv_t[:, 0, 0]
    raw = s_tok - (m + jnp.log(z_raw.sum(-1)))
    if processed is None:
        return token, raw
    proc = s_tok - (m + jnp.log(z_ok.sum(-1)))
    return token, jnp.where(processed & ~greedy, proc, raw)
