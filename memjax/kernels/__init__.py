"""Fused kernels for the trainer, each beside a pure-JAX reference (DESIGN principle 4).

Owns the package `memjax.kernels` (the repo's top-level `kernels/` is a symlink to this folder, so the
card's layout exists while the import path stays unambiguous; a PyPI package named `kernels` exists):

* `token_logprob_entropy` (fused_logprob): masked per-token log p(target) + entropy over a vocabulary-tiled
  LM head, custom VJP, [N, V] logits never materialised. impl "pallas" | "chunked" | "reference" | "auto".
* `step_ratio_loss` / `token_clip_surrogate` (step_ratio_loss): Memory-R2 length-normalised step-level
  dual-clip ratio loss and the DAPO token-level clip-higher surrogate, with custom VJPs and metrics.
* `reference`: the dense pure-JAX definitions the kernels are tested against.

Every public function validates its shapes with a one-line ValueError naming the tensor, never donates
its inputs, and returns float32 results.
"""

from . import reference
from .fused_logprob import token_logprob_entropy
from .reference import step_ratio_loss_ref, token_clip_surrogate_ref, token_logprob_entropy_ref
from .step_ratio_loss import step_ratio_loss, token_clip_surrogate

__all__ = ["reference", "token_logprob_entropy", "token_logprob_entropy_ref", "step_ratio_loss",
           "step_ratio_loss_ref", "token_clip_surrogate", "token_clip_surrogate_ref"]
