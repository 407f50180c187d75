"""Trainer-side per-token log-probs (and entropy) of a RolloutBatch under a model.

Owns: `token_logprobs(model, input_ids, loss_mask, temperature, ...)` -> (logp, entropy), both f32 [N, T]
aligned like RolloutBatch.old_logp: entry t scores input_ids[:, t] given input_ids[:, :t] (entry 0 is 0),
and zero wherever loss_mask is 0. Uses the same `Qwen2.forward` as the engine (one model code path) and
the vocabulary-tiled fused log-prob (memjax.kernels), so the [N, T, V] logits never exist. Positions are
0..T-1 per row, exactly as the engine saw them (each conversation is its own sequence, right-padded).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from ..kernels import token_logprob_entropy


def token_logprobs(model, input_ids: jax.Array, loss_mask: jax.Array, *, temperature: float = 1.0,
                   remat: bool = False, impl: str = "auto") -> tuple[jax.Array, jax.Array]:
    hidden, _ = model.forward(input_ids, return_hidden=True, remat=remat)  # [N, T, h]
    mask = loss_mask[:, 1:] > 0
    w = model.lm_head_weight().astype(hidden.dtype)
    logp, ent = token_logprob_entropy(hidden[:, :-1], w, input_ids[:, 1:], mask, temperature=temperature,
                                      impl=impl, compact=False)
    pad = jnp.zeros((input_ids.shape[0], 1), jnp.float32)
    return jnp.concatenate([pad, logp], axis=1), jnp.concatenate([pad, ent], axis=1)
