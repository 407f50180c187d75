"""Fused kernels for the trainer and the engine, each beside a pure-JAX reference (docs/architecture.md, principle 4).

Owns the package `memjax.kernels` (the repo's top-level `kernels/` is a symlink to this folder; the import path
stays `memjax.kernels` because a PyPI package named `kernels` exists). Modules: fused_logprob
(`token_logprob_entropy`), step_ratio_loss (`step_ratio_loss`, `token_clip_surrogate`), paged_attention (the
engine's paged attention; `attend.engine_attend` binds its options), ragged_paged_attention (the mixed schedule's
packed rows), rope_kv (the fused decode prologue), decode_merged (split-K merge in the kernel),
paged_attention_mgpu (Mosaic GPU decode), kv_store (how the KV pool stores values) and reference (the dense
definitions every kernel is tested against).
Invariants: every public function validates its shapes with a one-line ValueError naming the tensor and never
donates its inputs (the in-place KV writers alias the pool and return it); loss kernels return float32, attention
returns q's dtype. docs/engine.md, "Kernels and their defaults" and "Kernel design", has the defaults, their
measurements and each kernel's layout.
"""

from . import reference
from .fused_logprob import token_logprob_entropy
from .attend import engine_attend
from .paged_attention import paged_attention, paged_attention_ref
from .ragged_paged_attention import ragged_paged_attention
from .reference import step_ratio_loss_ref, token_clip_surrogate_ref, token_logprob_entropy_ref
from .step_ratio_loss import step_ratio_loss, token_clip_surrogate

__all__ = ["reference", "token_logprob_entropy", "token_logprob_entropy_ref", "step_ratio_loss",
           "step_ratio_loss_ref", "token_clip_surrogate", "token_clip_surrogate_ref", "paged_attention",
           "paged_attention_ref", "engine_attend", "ragged_paged_attention"]
