"""ModelConfig: the typed, frozen description of a Qwen2.5 decoder.

Owns: architecture hyper-parameters and the parameter/compute dtypes. Validated on construction, so a
bad preset or a bad Hugging Face config fails here with a message naming the field.
Invariants: hidden_size == num_heads * head_dim unless head_dim is given explicitly; num_heads is a
multiple of num_kv_heads (grouped-query attention); dtypes are names jnp understands.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import jax.numpy as jnp

_DTYPES = ("float32", "bfloat16", "float16")


@dataclass(frozen=True)
class ModelConfig:
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int = 0  # 0 -> hidden_size // num_heads
    rope_theta: float = 1_000_000.0
    rms_norm_eps: float = 1e-6
    tie_word_embeddings: bool = False
    max_position_embeddings: int = 32_768
    attention_bias: bool = True  # Qwen2: biases on q/k/v projections, none on o
    param_dtype: str = "float32"  # storage dtype of the weights
    dtype: str = "float32"  # compute dtype of activations (logits are always returned in float32)
    name: str = field(default="custom", compare=False)

    def __post_init__(self) -> None:
        for f in ("vocab_size", "hidden_size", "intermediate_size", "num_layers", "num_heads",
                  "num_kv_heads", "max_position_embeddings"):
            v = getattr(self, f)
            if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
                raise ValueError(f"ModelConfig.{f} must be a positive int, got {v!r}")
        if self.head_dim == 0:
            if self.hidden_size % self.num_heads:
                raise ValueError(f"ModelConfig.hidden_size={self.hidden_size} is not divisible by "
                                 f"num_heads={self.num_heads}; give head_dim explicitly")
            object.__setattr__(self, "head_dim", self.hidden_size // self.num_heads)
        if self.head_dim < 0 or self.head_dim % 2:
            raise ValueError(f"ModelConfig.head_dim must be a positive even int (rotary), got {self.head_dim}")
        if self.num_heads % self.num_kv_heads:
            raise ValueError(f"ModelConfig.num_heads={self.num_heads} must be a multiple of "
                             f"num_kv_heads={self.num_kv_heads}")
        if not self.rope_theta > 0:
            raise ValueError(f"ModelConfig.rope_theta must be > 0, got {self.rope_theta}")
        if not self.rms_norm_eps > 0:
            raise ValueError(f"ModelConfig.rms_norm_eps must be > 0, got {self.rms_norm_eps}")
        for f in ("param_dtype", "dtype"):
            if getattr(self, f) not in _DTYPES:
                raise ValueError(f"ModelConfig.{f} must be one of {_DTYPES}, got {getattr(self, f)!r}")

    @property
    def q_size(self) -> int:
        return self.num_heads * self.head_dim

    @property
    def kv_size(self) -> int:
        return self.num_kv_heads * self.head_dim

    @property
    def group_size(self) -> int:
        return self.num_heads // self.num_kv_heads

    @property
    def jnp_dtype(self):
        return jnp.dtype(self.dtype)

    @property
    def jnp_param_dtype(self):
        return jnp.dtype(self.param_dtype)

    def replace(self, **changes) -> "ModelConfig":
        return dataclasses.replace(self, **changes)
