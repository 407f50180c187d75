"""The Qwen2.5 decoder in Flax NNX, shared by the rollout engine and the trainer.

Owns parameters and the forward pass. Layer weights are stacked along a leading [L] axis and the blocks run under
`jax.lax.scan` (one compiled block, compile time independent of depth). Kernels are [in, out] (the transpose of
torch's Linear.weight); `Qwen2`'s docstring lists the parameter layout.
Forward contract: `model(ids)` int32 [B, T] -> float32 logits [B, T, V], causal, positions 0..T-1;
`model.forward(ids, positions, attention=..., state=...)` threads an attention back-end's state (e.g. a paged KV
cache) through the layers and can return final hidden states instead of logits. `forward(..., sharding=S)` applies
a `LayerSharding` inside the scanned block (`S.params` to each layer's parameters, `S.activations` to the residual
stream); the model names no mesh axis (memjax/parallel/fsdp.py builds S from a mesh).
Invariants: weights are stored in cfg.param_dtype and cast to cfg.dtype for compute; logits are float32.
"""

from __future__ import annotations

import math
from typing import Any, Protocol

import jax
import jax.numpy as jnp
from flax import nnx

from .attention import AttentionFn, DenseCausal
from .config import ModelConfig
from .layers import apply_rope, rms_norm, rope_cos_sin, swiglu

LAYER_PARAMS = ("input_norm", "q_w", "q_b", "k_w", "k_b", "v_w", "v_b", "o_w", "post_norm",
                "gate_w", "up_w", "down_w")


class LayerSharding(Protocol):
    def params(self, p: dict[str, jax.Array]) -> dict[str, jax.Array]: ...

    def activations(self, x: jax.Array) -> jax.Array: ...


def _not_resharded(prim, *_, **__) -> bool:
    """Remat policy under a LayerSharding: save every residual except the outputs of sharding
    constraints, so a layer's gathered weights are gathered again in the backward pass instead of being
    kept for all L layers (which would hold the whole model on every device)."""
    return prim.name != "sharding_constraint"


def param_shapes(cfg: ModelConfig) -> dict[str, tuple[int, ...]]:
    """Shapes of every parameter (stacked layer params carry the leading L axis)."""
    L, h, I, V = cfg.num_layers, cfg.hidden_size, cfg.intermediate_size, cfg.vocab_size
    q, kv = cfg.q_size, cfg.kv_size
    shapes = {
        "embed": (V, h),
        "layers/input_norm": (L, h), "layers/post_norm": (L, h),
        "layers/q_w": (L, h, q), "layers/k_w": (L, h, kv), "layers/v_w": (L, h, kv),
        "layers/o_w": (L, q, h),
        "layers/gate_w": (L, h, I), "layers/up_w": (L, h, I), "layers/down_w": (L, I, h),
        "final_norm": (h,),
    }
    if cfg.attention_bias:
        shapes.update({"layers/q_b": (L, q), "layers/k_b": (L, kv), "layers/v_b": (L, kv)})
    if not cfg.tie_word_embeddings:
        shapes["lm_head"] = (h, V)
    return shapes


class Layers(nnx.Module):
    """Stacked per-layer parameters; attributes named as in LAYER_PARAMS."""

    def __init__(self, cfg: ModelConfig, rngs: nnx.Rngs, std: float):
        L, h, I = cfg.num_layers, cfg.hidden_size, cfg.intermediate_size
        pd = cfg.jnp_param_dtype
        normal = lambda *shape: nnx.Param(std * jax.random.normal(rngs.params(), shape, jnp.float32).astype(pd))
        self.input_norm = nnx.Param(jnp.ones((L, h), pd))
        self.post_norm = nnx.Param(jnp.ones((L, h), pd))
        self.q_w, self.k_w, self.v_w = normal(L, h, cfg.q_size), normal(L, h, cfg.kv_size), normal(L, h, cfg.kv_size)
        self.o_w = normal(L, cfg.q_size, h)
        if cfg.attention_bias:
            self.q_b = nnx.Param(jnp.zeros((L, cfg.q_size), pd))
            self.k_b = nnx.Param(jnp.zeros((L, cfg.kv_size), pd))
            self.v_b = nnx.Param(jnp.zeros((L, cfg.kv_size), pd))
        self.gate_w, self.up_w, self.down_w = normal(L, h, I), normal(L, h, I), normal(L, I, h)


class Qwen2(nnx.Module):
    """Qwen2.5 causal LM. Construct with `Qwen2(cfg, rngs=nnx.Rngs(seed))` (random N(0, 0.02) init).

    Parameter layout (kernels are [in, out]): embed [V, h]; layers/{input_norm, post_norm} [L, h];
    layers/{q,k,v}_w [L, h, H*D | KV*D]; layers/{q,k,v}_b [L, H*D | KV*D]; layers/o_w [L, H*D, h];
    layers/{gate,up}_w [L, h, I]; layers/down_w [L, I, h]; final_norm [h]; lm_head [h, V] (absent when tied to embed).
    """

    def __init__(self, cfg: ModelConfig, *, rngs: nnx.Rngs, init_std: float = 0.02):
        self.cfg = cfg
        pd = cfg.jnp_param_dtype
        self.embed = nnx.Param(init_std * jax.random.normal(rngs.params(), (cfg.vocab_size, cfg.hidden_size),
                                                            jnp.float32).astype(pd))
        self.layers = Layers(cfg, rngs, init_std)
        self.final_norm = nnx.Param(jnp.ones((cfg.hidden_size,), pd))
        if not cfg.tie_word_embeddings:
            self.lm_head = nnx.Param(init_std * jax.random.normal(rngs.params(), (cfg.hidden_size, cfg.vocab_size),
                                                                  jnp.float32).astype(pd))

    # -- forward ---------------------------------------------------------------------------------
    def __call__(self, input_ids: jax.Array) -> jax.Array:
        """ids int [B, T] (an array, or nested lists) -> logits f32 [B, T, V]. Concrete ids are checked: an id
        outside [0, vocab) is a ValueError, not NaN logits (inside jit, where ids are traced, they are not)."""
        if not isinstance(input_ids, jax.core.Tracer):
            input_ids = check_ids(input_ids, self.cfg.vocab_size)
        logits, _ = self.forward(input_ids)
        return logits

    def forward(self, input_ids: jax.Array, positions: jax.Array | None = None, *,
                attention: AttentionFn | None = None, state: Any = None,
                return_hidden: bool = False, remat: bool = False,
                sharding: LayerSharding | None = None) -> tuple[jax.Array, Any]:
        """ids int [B, T], positions int [B, T] (default 0..T-1) -> (logits f32 [B,T,V] or hidden [B,T,h], state)."""
        cfg = self.cfg
        dt = cfg.jnp_dtype
        b, t = input_ids.shape
        if positions is None:
            positions = jnp.broadcast_to(jnp.arange(t, dtype=jnp.int32), (b, t))
        attention = attention or DenseCausal()
        table = self.embed[...]
        if sharding is not None and hasattr(sharding, "table"):
            table = sharding.table(table)  # gathered before the lookup: a device looks up its own rows locally
        x = jnp.take(table, input_ids, axis=0).astype(dt)
        if sharding is not None:
            x = sharding.activations(x)
        cos, sin = rope_cos_sin(positions, cfg.head_dim, cfg.rope_theta, dt)
        stacked = {name: getattr(self.layers, name)[...] for name in LAYER_PARAMS if hasattr(self.layers, name)}

        def block(carry, xs):
            x, st = carry
            p, layer = xs
            if sharding is not None:
                p = sharding.params(jax.tree.map(lambda a: a.astype(dt), p))  # gathered in the compute dtype
                x = sharding.activations(x)
            x, st = decoder_layer(cfg, p, x, cos, sin, attention, layer, st)
            if sharding is not None:
                x = sharding.activations(x)
            return (x, st), None

        if remat:
            block = jax.checkpoint(block, prevent_cse=False)
        elif sharding is not None:  # keep activations, but re-gather weights in the backward pass (ZeRO-3)
            block = jax.checkpoint(block, prevent_cse=False, policy=_not_resharded)
        (x, state), _ = jax.lax.scan(block, (x, state), (stacked, jnp.arange(cfg.num_layers, dtype=jnp.int32)))
        x = rms_norm(x, self.final_norm[...], cfg.rms_norm_eps)
        if return_hidden:
            return x, state
        return self.logits(x), state

    def lm_head_weight(self) -> jax.Array:
        """[h, V] view of the output projection (the embedding transposed when tied)."""
        return self.embed[...].T if self.cfg.tie_word_embeddings else self.lm_head[...]

    def logits(self, hidden: jax.Array) -> jax.Array:
        """hidden [..., h] -> f32 logits [..., V] (`output_logits`)."""
        return output_logits(self.cfg, hidden, self.embed[...],
                             None if self.cfg.tie_word_embeddings else self.lm_head[...])


def decoder_layer(cfg: ModelConfig, p: dict[str, jax.Array], x: jax.Array, cos: jax.Array, sin: jax.Array,
                  attention: AttentionFn, layer, st) -> tuple[jax.Array, Any]:
    """One decoder block on x [b, t, h] with this layer's parameters `p` (LAYER_PARAMS names, or the rollout
    engine's fused ones: `qkv_w` [h, q + 2kv] with `qkv_b`, `gate_up_w` [h, 2I]; memjax/engine/weights.py).

    The projections run on [b * t, h] rows (a free reshape): the backward's weight gradient is then one dot
    contracting one dimension. On [b, t, h], it contracts two, and XLA's canonical dot needs the [b, t, n] output
    gradient transposed to [n, b * t] first; XLA:CPU fused that transpose with the gradient's elementwise producers
    into strided loops that took 38% of the tiny update (tests/unit/model/test_model.py holds the shape)."""
    b, t = x.shape[:2]
    dt = cfg.jnp_dtype
    p = jax.tree.map(lambda a: a.astype(dt), p)
    x = x.reshape(b * t, x.shape[-1])
    hn = rms_norm(x, p["input_norm"], cfg.rms_norm_eps)
    if t == 1 and getattr(attention, "fused_prologue", False):  # the back-end adds bias, RoPE and writes K/V itself
        o, st = _fused_prologue_attention(cfg, p, hn, cos[:, 0], sin[:, 0], attention, layer, st)
    else:
        o, st = _attention(cfg, p, hn, b, t, cos, sin, attention, layer, st)
    x = x + o.reshape(b * t, cfg.q_size) @ p["o_w"]
    hn = rms_norm(x, p["post_norm"], cfg.rms_norm_eps)
    if "gate_up_w" in p:
        g, u = jnp.split(hn @ p["gate_up_w"], 2, axis=-1)
        x = x + (jax.nn.silu(g) * u) @ p["down_w"]
    else:
        x = x + swiglu(hn, p["gate_w"], p["up_w"], p["down_w"])
    return x.reshape(b, t, x.shape[-1]), st


def _fused_prologue_attention(cfg: ModelConfig, p, hn, cos, sin, attention, layer, st):
    """A one-token step through a back-end with `fused_prologue` (the rollout engine's EngineConfig.kernels.fuse_rope_kv):
    it gets the projections' outputs before bias and RoPE, as (sources, first columns of q / k / v, biases)."""
    if "qkv_w" in p:
        y = hn @ p["qkv_w"]
        srcs, cols = (y, y, y), (0, cfg.q_size, cfg.q_size + cfg.kv_size)
        bias = (p["qkv_b"],) * 3 if cfg.attention_bias else None
    else:
        srcs, cols = (hn @ p["q_w"], hn @ p["k_w"], hn @ p["v_w"]), (0, 0, 0)
        bias = (p["q_b"], p["k_b"], p["v_b"]) if cfg.attention_bias else None
    return attention.prologue_attend(srcs, cols, bias, cos, sin, num_heads=cfg.num_heads, layer=layer, state=st)


def _attention(cfg: ModelConfig, p, hn, b, t, cos, sin, attention, layer, st):
    """Projections, bias, RoPE and `attention` -> (out [b, t, H, D], state)."""
    if "qkv_w" in p:
        q, k, v = jnp.split(hn @ p["qkv_w"], (cfg.q_size, cfg.q_size + cfg.kv_size), axis=-1)
    else:
        q, k, v = hn @ p["q_w"], hn @ p["k_w"], hn @ p["v_w"]
    if cfg.attention_bias:  # added outside the GEMMs: a bias epilogue keeps XLA:GPU from reading the
        # layer's weight slice in place and it copies the slice first (memjax/engine/loop.py)
        q, k, v = jax.lax.optimization_barrier((q, k, v))
        if "qkv_b" in p:
            bq, bk, bv = jnp.split(p["qkv_b"], (cfg.q_size, cfg.q_size + cfg.kv_size), axis=-1)
        else:
            bq, bk, bv = p["q_b"], p["k_b"], p["v_b"]
        q, k, v = q + bq, k + bk, v + bv
    q = apply_rope(q.reshape(b, t, cfg.num_heads, cfg.head_dim), cos, sin)
    k = apply_rope(k.reshape(b, t, cfg.num_kv_heads, cfg.head_dim), cos, sin)
    v = v.reshape(b, t, cfg.num_kv_heads, cfg.head_dim)
    return attention(q, k, v, layer=layer, state=st)


def output_logits(cfg: ModelConfig, hidden: jax.Array, embed: jax.Array, lm_head: jax.Array | None) -> jax.Array:
    """hidden [..., h] -> f32 logits [..., V]; lm_head None = tied to embed [V, h]. A tied head contracts the
    [V, h] table as stored: written as `hidden @ table.T`, XLA:CPU copies the transposed table before a
    small-batch dot (Qwen2.5's 151,936 x 256 table at batch 1: 46 ms vs 21 ms per decode round;
    benchmarks/peers/generation.py)."""
    dt = cfg.jnp_dtype
    if lm_head is None:
        return jnp.einsum("...h,vh->...v", hidden.astype(dt), embed.astype(dt), preferred_element_type=jnp.float32)
    return jnp.einsum("...h,hv->...v", hidden.astype(dt), lm_head.astype(dt), preferred_element_type=jnp.float32)


def check_ids(input_ids, vocab_size: int) -> jax.Array:
    """Concrete token ids as an int32 [B, T] array, every id in [0, vocab_size); else one ValueError line."""
    import numpy as np

    try:
        ids = np.asarray(input_ids)
    except (ValueError, TypeError) as e:
        raise ValueError(f"model(input_ids): not an integer array [B, T] ({e})") from None
    if ids.ndim != 2 or not (np.issubdtype(ids.dtype, np.integer) or ids.size == 0):
        raise ValueError(f"model(input_ids): expected integer ids of shape [B, T], got {ids.dtype} of shape "
                         f"{ids.shape}")
    if ids.size and (ids.min() < 0 or ids.max() >= vocab_size):
        bad = int(ids.max()) if ids.max() >= vocab_size else int(ids.min())
        raise ValueError(f"model(input_ids): id {bad} is outside the vocabulary [0, {vocab_size}) (a tokenizer of "
                         "another model?)")
    return jnp.asarray(ids, jnp.int32)


def init_model(cfg: ModelConfig, seed: int = 0) -> Qwen2:
    return Qwen2(cfg, rngs=nnx.Rngs(params=seed))


def abstract_model(cfg: ModelConfig) -> Qwen2:
    """The model with ShapeDtypeStruct leaves: no weights allocated."""
    return nnx.eval_shape(lambda: Qwen2(cfg, rngs=nnx.Rngs(params=0)))


def count_params(cfg: ModelConfig) -> int:
    """Number of parameters, as Hugging Face counts them (tied embedding once); allocates nothing."""
    state = nnx.state(abstract_model(cfg), nnx.Param)
    return sum(math.prod(x.shape) for x in jax.tree.leaves(state))
