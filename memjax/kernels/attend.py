"""The engine's attention back-end: `engine_attend(...)` binds the paged-attention kernels' options into the function
`PagedAttention(attend=...)` calls (memjax/engine/paged_kv.py).

Owns `engine_attend`. The returned function has `paged_attention`'s signature (q [b, t, H, D], pools, layer, page
table, q_pos, kv_len) and picks decode or prefill options from t at trace time; with a Pallas or Mosaic impl it
carries `.ragged`, `ragged_paged_attention` with the same options, for the mixed round's packed rows; with the Pallas
impl also `.decode_rows`, `decode_from_rows` (decode from the padded row layout `rope_kv` writes), and
`.decode_merged` (the same, its split-K merge inside the kernel: memjax/kernels/decode_merged.py). Nothing is donated.
"""

from __future__ import annotations

import functools

from .decode_merged import decode_merged
from .paged_attention import PAGED_IMPLS, decode_from_rows, paged_attention
from .ragged_paged_attention import ragged_paged_attention

__all__ = ["engine_attend"]


def engine_attend(*, impl: str = "auto", num_splits: int = 1, prefill_num_splits: int = 1, block_q: int = 64,
                  interpret: bool | None = None):
    """`paged_attention` with options bound, for `PagedAttention(..., attend=engine_attend(...))`.

    num_splits applies to decode steps (t = 1), prefill_num_splits to chunks (t > 1; their row blocks
    already give many programs, so split-K there mostly adds combine traffic). t is static, so the
    choice is made at trace time. impl="mosaic" is decode-only: chunks use impl="auto". With a Pallas or Mosaic
    impl the function carries `.ragged`, the packed-rows kernel the mixed schedule's round uses (PagedAttention).
    """
    if impl not in PAGED_IMPLS:
        raise ValueError(f"engine_attend: impl must be one of {PAGED_IMPLS}, got {impl!r}")

    def attend(q, k_pages, v_pages, layer, page_table, q_pos, kv_len):
        decode = q.shape[1] == 1
        splits = num_splits if decode else prefill_num_splits
        which = impl if decode or impl != "mosaic" else "auto"
        return paged_attention(q, k_pages, v_pages, layer, page_table, q_pos, kv_len, impl=which,
                               num_splits=splits, block_q=block_q, interpret=interpret)

    attend.block_q, attend.interpret = block_q, interpret  # also read by PagedAttention.prologue_attend
    if impl == "pallas":  # decode from the row layout memjax/kernels/rope_kv.py writes (EngineConfig.kernels.fuse_rope_kv)
        attend.decode_rows = functools.partial(decode_from_rows, num_splits=num_splits, interpret=interpret)
        # the same with the splits merged in the kernel (EngineConfig.kernels.fuse_split_combine)
        attend.decode_merged = functools.partial(decode_merged, num_splits=num_splits, interpret=interpret)
    if impl != "reference":  # the mixed round's packed rows (memjax/kernels/ragged_paged_attention.py)
        attend.ragged = functools.partial(ragged_paged_attention, impl="auto" if impl == "auto" else "pallas",
                                          block_q=block_q, interpret=interpret)
    return attend
