"""Pure functions for the pieces of a Qwen2 block: RMSNorm, rotary embeddings, SwiGLU.

Invariants: RMSNorm statistics are computed in float32 and the result is cast back to the input dtype
before the weight multiply (as Hugging Face does); rotary angles are computed in float32 from explicit
integer positions (so paged decode and chunked prefill pass their own), in the rotate-half layout.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp


def rms_norm(x: jax.Array, weight: jax.Array, eps: float) -> jax.Array:
    x32 = x.astype(jnp.float32)
    y = x32 * jax.lax.rsqrt(jnp.mean(x32 * x32, axis=-1, keepdims=True) + eps)
    return weight.astype(x.dtype) * y.astype(x.dtype)


def rope_cos_sin(positions: jax.Array, head_dim: int, theta: float, dtype) -> tuple[jax.Array, jax.Array]:
    """positions int [..., T] -> cos, sin [..., T, head_dim] in `dtype` (angles in float32)."""
    inv_freq = 1.0 / (theta ** (jnp.arange(0, head_dim, 2, dtype=jnp.float32) / head_dim))
    ang = positions.astype(jnp.float32)[..., None] * inv_freq  # [..., T, D/2]
    ang = jnp.concatenate([ang, ang], axis=-1)
    return jnp.cos(ang).astype(dtype), jnp.sin(ang).astype(dtype)


def apply_rope(x: jax.Array, cos: jax.Array, sin: jax.Array) -> jax.Array:
    """x [B, T, N, D]; cos/sin [B, T, D] -> rotated x (rotate-half form)."""
    half = x.shape[-1] // 2
    rot = jnp.concatenate([-x[..., half:], x[..., :half]], axis=-1)
    return x * cos[:, :, None, :] + rot * sin[:, :, None, :]


def swiglu(x: jax.Array, w_gate: jax.Array, w_up: jax.Array, w_down: jax.Array) -> jax.Array:
    g = x @ w_gate
    return (jax.nn.silu(g) * (x @ w_up)) @ w_down
