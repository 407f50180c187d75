"""Fused kernels for the trainer, each beside a pure-JAX reference (docs/architecture.md, principle 4).

Owns the package `memjax.kernels` (the repo's top-level `kernels/` is a symlink to this folder, so the
card's layout exists while the import path stays unambiguous; a PyPI package named `kernels` exists):

* `token_logprob_entropy` (fused_logprob): masked per-token log p(target) + entropy over a vocabulary-tiled
  LM head, custom VJP, [N, V] logits never materialised. impl "pallas" | "chunked" | "reference" | "auto".
* `step_ratio_loss` / `token_clip_surrogate` (step_ratio_loss): Memory-R2 length-normalised step-level
  dual-clip ratio loss and the DAPO token-level clip-higher surrogate, with custom VJPs and metrics.
* `paged_attention` (paged_attention): the engine's paged attention (decode, chunked prefill, split-K)
  as a portable Pallas kernel with the engine's signature; `engine_attend(...)` (attend) binds its options for
  `PagedAttention(attend=...)`; `paged_attention_ref` is the engine's pure-JAX reference. impl "pallas" |
  "mosaic" | "reference" | "auto" (pallas on GPU for supported page/head sizes). Output in q's dtype.
* `ragged_paged_attention` (ragged_paged_attention): packed token rows of many sequences (the mixed schedule's
  round), each sequence's rows in blocks that read its context once, through the same Pallas kernel.
* `rope_kv` (rope_kv): a decode step's q/k/v bias, RoPE, K/V page writes (pool aliased in place) and the query in
  the paged-attention kernel's padded row layout, one Pallas kernel (EngineConfig.kernels.fuse_rope_kv); `rope_kv_ref` is
  its pure-JAX specification.
* `decode_merged` (decode_merged): decode attention from that row layout whose split-K merge happens inside the
  kernel (the last program of each sequence and kv head merges, counted by an atomic; EngineConfig.kernels.fuse_split_combine).
* `kv_store`: how the paged KV pool stores values (`to_pool`, `store_rows`, a float8 pool's query dtype and
  scale), shared by the engine's writes and these kernels.
* `paged_attention_mgpu`: the decode kernel in Pallas Mosaic GPU (Hopper+), impl="mosaic", the
  Triton backend's successor (docs/engine.md, "Pallas backend").
* `reference`: the dense pure-JAX definitions the kernels are tested against.

Every public function validates its shapes with a one-line ValueError naming the tensor, never donates
its inputs, and returns float32 results.
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
