"""Trainer-side per-token log-probs (and entropy) of a RolloutBatch under a model.

Owns `token_logprobs(model, input_ids, loss_mask, temperature, ...)` -> (logp, entropy), both f32 [N, T] aligned
like RolloutBatch.old_logp (entry t scores input_ids[:, t] given input_ids[:, :t]; entry 0 is 0) and zero wherever
loss_mask is 0. It runs the engine's `Qwen2.forward` (one model code path) and the vocabulary-tiled fused log-prob
(memjax.kernels), so [N, T, V] logits never exist; packed rows (memjax/rl/packing.py) pass `positions`,
`segment_ids` and a training `attention` back-end; `sharding` is the FSDP LayerSharding.
logprobs="processed" with top_p < 1 or top_k > 0 recomputes the engine's truncated, renormalised log-prob with the
engine's own threshold and log-prob functions (memjax.engine.sampler), one conversation's [T, V] logits at a time;
entropy stays that of the full tempered distribution.
Invariants: without a `sharding` the fused log-prob compacts the valid tokens first, so masked tokens cost no
LM-head work; with one, rows stay in place (a global permutation would gather them across devices).
docs/engine.md, "Kernels and their defaults", has the measured effect of compaction.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from ..engine.sampler import Truncation, allowed_mask, processed_logprob
from ..kernels import token_logprob_entropy


def _processed(hidden, w, targets, temperature: float, top_p: float, top_k: int):
    """hidden [N, T, h], w [h, V], targets [N, T] -> processed log-probs f32 [N, T], row by row."""
    def row(args):
        h, tgt = args
        scaled = jnp.einsum("th,hv->tv", h.astype(w.dtype), w, preferred_element_type=jnp.float32) / temperature
        t = scaled.shape[0]
        allowed = allowed_mask(scaled, jnp.full(t, top_p, jnp.float32), jnp.full(t, top_k, jnp.int32),
                               Truncation(top_k=top_k > 0, top_p=top_p < 1))  # only the searches in use
        return processed_logprob(scaled, allowed, tgt)
    return jax.lax.map(row, (hidden, targets))


def token_logprobs(model, input_ids: jax.Array, loss_mask: jax.Array, *, temperature: float = 1.0,
                   remat: bool = False, impl: str = "auto", logprobs: str = "raw", top_p: float = 1.0,
                   top_k: int = 0, positions: jax.Array | None = None, segment_ids: jax.Array | None = None,
                   attention=None, sharding=None) -> tuple[jax.Array, jax.Array]:
    if logprobs not in ("raw", "processed"):
        raise ValueError(f"token_logprobs: logprobs must be 'raw' or 'processed', got {logprobs!r}")
    hidden, _ = model.forward(input_ids, positions, attention=attention, state=segment_ids, return_hidden=True,
                              remat=remat, sharding=sharding)  # [N, T, h]
    mask = loss_mask[:, 1:] > 0
    w = model.lm_head_weight().astype(hidden.dtype)
    if sharding is not None:
        w = sharding.head(w)
    fused = lambda h_, w_, t_, m_: token_logprob_entropy(h_, w_, t_, m_, temperature=temperature, impl=impl,
                                                         compact=sharding is None)
    if sharding is not None and hasattr(sharding, "row_map"):
        fused = sharding.row_map(fused, hidden.shape[0])  # each device its own rows (memjax/parallel/fsdp.py)
    logp, ent = fused(hidden[:, :-1], w, input_ids[:, 1:], mask)
    if logprobs == "processed" and (top_p < 1.0 or top_k > 0):
        logp = jnp.where(mask, _processed(hidden[:, :-1], w, input_ids[:, 1:], temperature, top_p, top_k), 0.0)
    pad = jnp.zeros((input_ids.shape[0], 1), jnp.float32)
    return jnp.concatenate([pad, logp], axis=1), jnp.concatenate([pad, ent], axis=1)
