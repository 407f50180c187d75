"""Cache-free greedy decoding: the oracle the paged engine is tested against.

Owns: `greedy_generate(model, prompt_ids, max_new_tokens)`. Each step re-runs the full causal forward
over a fixed-size [1, P + N] buffer (one compiled program per buffer size) and takes the argmax at the
last filled position, so it is O(N * (P + N)^2) and meant for small models and tests, not throughput.
Returns the new token ids and their log-probs (float32, raw model distribution).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx

from .qwen2 import Qwen2


@nnx.jit(static_argnums=(3,))
def _step(model: Qwen2, buf: jax.Array, cur: jax.Array, _size: int):
    logits = model(buf)[0]  # [S, V]
    row = jax.lax.dynamic_index_in_dim(logits, cur - 1, axis=0, keepdims=False)
    tok = jnp.argmax(row).astype(jnp.int32)
    lp = jax.nn.log_softmax(row)[tok]
    return buf.at[0, cur].set(tok), tok, lp


def greedy_generate(model: Qwen2, prompt_ids: list[int], max_new_tokens: int,
                    stop_token_ids: tuple[int, ...] = ()) -> tuple[list[int], list[float]]:
    if not prompt_ids:
        raise ValueError("greedy_generate: prompt_ids is empty")
    if max_new_tokens <= 0:
        raise ValueError(f"greedy_generate: max_new_tokens must be > 0, got {max_new_tokens}")
    p = len(prompt_ids)
    size = p + max_new_tokens
    buf = jnp.zeros((1, size), jnp.int32).at[0, :p].set(jnp.asarray(prompt_ids, jnp.int32))
    toks, lps = [], []
    for i in range(max_new_tokens):
        buf, tok, lp = _step(model, buf, jnp.int32(p + i), size)
        toks.append(int(tok))
        lps.append(float(lp))
        if toks[-1] in stop_token_ids:
            break
    return toks, lps
