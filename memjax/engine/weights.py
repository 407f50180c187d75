"""The rollout engine's own layout of its weight copy and the forward pass over it.

Owns `uses_layout(ecfg)`, `engine_layout(params, mcfg, ecfg)` (the model's nnx.State of Params, already in
EngineConfig.kernels.weight_dtype -> the engine's dict of arrays) and `engine_forward` / `engine_logits` over it.
Two EngineConfig.kernels options select it:
- `layers="unrolled"`: every layer's weights are their own arrays and the forward is a Python loop, so each GEMM
  reads a fixed address and XLA:GPU need not update a command buffer per scanned layer (costs compile time).
- `fuse_projections=True`: q/k/v concatenated into `qkv_w` [h, q + 2kv] and gate/up into `gate_up_w` [h, 2I],
  once per weight update; in fp32 tokens and log-probs equal the unfused path's.
Invariants: the default (scan, unfused) never comes here (the engine keeps and merges the model's nnx.State); the
layout is single-device only. docs/engine.md, "Engine options", has both options and why.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx

from ..model.config import ModelConfig
from ..model.layers import rms_norm, rope_cos_sin
from ..model.qwen2 import decoder_layer, output_logits
from .config import EngineConfig


def uses_layout(ecfg: EngineConfig) -> bool:
    """True when the engine holds its weights in its own layout (not the model's nnx.State)."""
    return ecfg.kernels.layers != "scan" or ecfg.kernels.fuse_projections


def engine_layout(params, mcfg: ModelConfig, ecfg: EngineConfig) -> dict:
    """The model's Params (nnx.State) -> {"embed", "final_norm", ["lm_head"], "layers"}: layers a dict of
    stacked [L, ...] arrays ("scan") or a tuple of L per-layer dicts ("unrolled"), fused when asked."""
    d = nnx.to_pure_dict(params)
    layers = dict(d["layers"])
    if ecfg.kernels.fuse_projections:
        layers["qkv_w"] = jnp.concatenate([layers.pop("q_w"), layers.pop("k_w"), layers.pop("v_w")], axis=-1)
        if mcfg.attention_bias:
            layers["qkv_b"] = jnp.concatenate([layers.pop("q_b"), layers.pop("k_b"), layers.pop("v_b")], axis=-1)
        layers["gate_up_w"] = jnp.concatenate([layers.pop("gate_w"), layers.pop("up_w")], axis=-1)
    if ecfg.kernels.layers == "unrolled":
        layers = tuple({k: v[i] for k, v in layers.items()} for i in range(mcfg.num_layers))
    return {**{k: v for k, v in d.items() if k != "layers"}, "layers": layers}


def engine_forward(mcfg: ModelConfig, params: dict, ids: jax.Array, pos: jax.Array, attention, state):
    """ids, pos int [b, t] -> (final-normed hidden [b, t, h], attention state), over `engine_layout` weights."""
    dt = mcfg.jnp_dtype
    x = jnp.take(params["embed"], ids, axis=0).astype(dt)
    cos, sin = rope_cos_sin(pos, mcfg.head_dim, mcfg.rope_theta, dt)
    layers = params["layers"]
    if isinstance(layers, tuple):
        for i, p in enumerate(layers):
            with jax.named_scope(f"engine_layer{i}"):
                x, state = decoder_layer(mcfg, p, x, cos, sin, attention, jnp.int32(i), state)
    else:
        def block(carry, xs):
            x, st = carry
            return decoder_layer(mcfg, xs[0], x, cos, sin, attention, xs[1], st), None

        (x, state), _ = jax.lax.scan(block, (x, state), (layers, jnp.arange(mcfg.num_layers, dtype=jnp.int32)))
    return rms_norm(x, params["final_norm"], mcfg.rms_norm_eps), state


def engine_logits(mcfg: ModelConfig, params: dict, hidden: jax.Array) -> jax.Array:
    """hidden [..., h] -> f32 logits [..., V] (the model's tied or untied head)."""
    return output_logits(mcfg, hidden, params["embed"], params.get("lm_head"))
