"""Memory-efficient training attention: blockwise (flash-style) causal GQA with segment ids, and cuDNN.

Owns `BlockwiseCausal`, a pure-JAX back-end with the `AttentionFn` signature of memjax/model/attention.py and the
same function as `DenseCausal` (a token attends to earlier tokens of its own segment; segment 0 is padding that
attends to itself only), never materialising [B, H, T, T]: the forward is an online softmax over key blocks with
causal block skipping, saving only the output and the log-sum-exp; the backward (`jax.custom_vjp`) recomputes each
block's probabilities (FlashAttention-2's recipe). `CudnnCausal` calls cuDNN's fused kernel through
`jax.nn.dot_product_attention`, with segment ids in cuDNN's packed layout (`cudnn_packed_attention`).
`training_attention(kind)` picks "dense", "blockwise", "cudnn" or "auto".
Invariants: q [B, T, H, D], k/v [B, T, KV, D] (KV heads not repeated), segment ids int [B, T] or None; T is padded
to the block sizes internally (padding is segment 0); matmuls accumulate in float32, probabilities are cast to v's
dtype before the PV product and the output is in q's dtype; peak temporaries are O(B * H * block_q * block_k).
docs/engine.md, "Kernels and their defaults", has `auto`'s choice and the measured MFU.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import jax
import jax.numpy as jnp
from einops import rearrange

from .attention import AttentionFn, DenseCausal

_NEG = -1e30  # finite "minus infinity": masked entries never produce NaN through exp/max


def _pad_to(x: jax.Array, t: int, axis: int) -> jax.Array:
    pad = t - x.shape[axis]
    if pad == 0:
        return x
    widths = [(0, 0)] * x.ndim
    widths[axis] = (0, pad)
    return jnp.pad(x, widths)


def _block_mask(qpos, kpos, qseg, kseg):
    """qpos/qseg [B, bq], kpos/kseg [B, bk] -> bool [B, 1, 1, bq, bk] (broadcast over KV, G)."""
    causal = qpos[:, :, None] >= kpos[:, None, :]
    same = (qseg[:, :, None] == kseg[:, None, :]) & (qseg[:, :, None] > 0)
    diag = qpos[:, :, None] == kpos[:, None, :]
    return ((causal & same) | diag)[:, None, None]


def _slice(x, start, size, axis):
    return jax.lax.dynamic_slice_in_dim(x, start, size, axis=axis)


def _flash_fwd_impl(bq: int, bk: int, qg, k, v, seg, pos):
    """qg [B,KV,G,T,D], k/v [B,KV,T,D], seg/pos [B,T] (T a multiple of bq and bk) -> out, lse."""
    b, kvh, g, t, d = qg.shape
    scale = 1.0 / jnp.sqrt(jnp.float32(d))
    nq = t // bq

    def q_block(_, i):
        q0 = i * bq
        qi = _slice(qg, q0, bq, 3)
        qpos, qseg = _slice(pos, q0, bq, 1), _slice(seg, q0, bq, 1)
        n_kv = (q0 + bq + bk - 1) // bk  # key blocks that start at or before this query block ends

        def kv_step(j, carry):
            m, l, acc = carry
            k0 = j * bk
            kj, vj = _slice(k, k0, bk, 2), _slice(v, k0, bk, 2)
            mask = _block_mask(qpos, _slice(pos, k0, bk, 1), qseg, _slice(seg, k0, bk, 1))
            s = jnp.einsum("bkgtd,bksd->bkgts", qi, kj, preferred_element_type=jnp.float32) * scale
            s = jnp.where(mask, s, _NEG)
            m_new = jnp.maximum(m, s.max(-1))
            p = jnp.where(mask, jnp.exp(s - m_new[..., None]), 0.0)
            corr = jnp.exp(m - m_new)
            l = l * corr + p.sum(-1)
            pv = jnp.einsum("bkgts,bksd->bkgtd", p.astype(vj.dtype), vj, preferred_element_type=jnp.float32)
            return m_new, l, acc * corr[..., None] + pv

        init = (jnp.full((b, kvh, g, bq), _NEG, jnp.float32), jnp.zeros((b, kvh, g, bq), jnp.float32),
                jnp.zeros((b, kvh, g, bq, d), jnp.float32))
        m, l, acc = jax.lax.fori_loop(0, n_kv, kv_step, init)
        return None, ((acc / l[..., None]).astype(qg.dtype), m + jnp.log(l))

    _, (out, lse) = jax.lax.scan(q_block, None, jnp.arange(nq))
    out = rearrange(out, "n b k g t d -> b k g (n t) d")
    lse = rearrange(lse, "n b k g t -> b k g (n t)")
    return out, lse


def _flash_bwd_impl(bq: int, bk: int, qg, k, v, seg, pos, out, lse, do):
    b, kvh, g, t, d = qg.shape
    scale = 1.0 / jnp.sqrt(jnp.float32(d))
    nq, nk = t // bq, t // bk
    delta = jnp.sum(do.astype(jnp.float32) * out.astype(jnp.float32), axis=-1)  # [B,KV,G,T]

    def kv_block(dq, j):
        k0 = j * bk
        kj, vj = _slice(k, k0, bk, 2), _slice(v, k0, bk, 2)
        kpos, kseg = _slice(pos, k0, bk, 1), _slice(seg, k0, bk, 1)

        def q_step(i, carry):
            dq, dk, dv = carry
            q0 = i * bq
            qi, doi = _slice(qg, q0, bq, 3), _slice(do, q0, bq, 3)
            mask = _block_mask(_slice(pos, q0, bq, 1), kpos, _slice(seg, q0, bq, 1), kseg)
            s = jnp.einsum("bkgtd,bksd->bkgts", qi, kj, preferred_element_type=jnp.float32) * scale
            p = jnp.where(mask, jnp.exp(s - _slice(lse, q0, bq, 3)[..., None]), 0.0)
            dv = dv + jnp.einsum("bkgts,bkgtd->bksd", p.astype(doi.dtype), doi, preferred_element_type=jnp.float32)
            dp = jnp.einsum("bkgtd,bksd->bkgts", doi, vj, preferred_element_type=jnp.float32)
            ds = p * (dp - _slice(delta, q0, bq, 3)[..., None]) * scale
            dqi = jnp.einsum("bkgts,bksd->bkgtd", ds, kj, preferred_element_type=jnp.float32)
            dq = jax.lax.dynamic_update_slice_in_dim(dq, _slice(dq, q0, bq, 3) + dqi, q0, axis=3)
            dk = dk + jnp.einsum("bkgts,bkgtd->bksd", ds, qi, preferred_element_type=jnp.float32)
            return dq, dk, dv

        zeros = jnp.zeros((b, kvh, bk, d), jnp.float32)
        dq, dk, dv = jax.lax.fori_loop(k0 // bq, nq, q_step, (dq, zeros, zeros))
        return dq, (dk, dv)

    dq, (dk, dv) = jax.lax.scan(kv_block, jnp.zeros(qg.shape, jnp.float32), jnp.arange(nk))
    dk = rearrange(dk, "n b k t d -> b k (n t) d")
    dv = rearrange(dv, "n b k t d -> b k (n t) d")
    return dq.astype(qg.dtype), dk.astype(k.dtype), dv.astype(v.dtype)


@functools.partial(jax.custom_vjp, nondiff_argnums=(0, 1))
def _flash(bq, bk, qg, k, v, seg, pos):
    return _flash_fwd_impl(bq, bk, qg, k, v, seg, pos)[0]


def _flash_fwd(bq, bk, qg, k, v, seg, pos):
    out, lse = _flash_fwd_impl(bq, bk, qg, k, v, seg, pos)
    return out, (qg, k, v, seg, pos, out, lse)


def _flash_bwd(bq, bk, res, do):
    qg, k, v, seg, pos, out, lse = res
    dq, dk, dv = _flash_bwd_impl(bq, bk, qg, k, v, seg, pos, out, lse, do)
    return dq, dk, dv, None, None


_flash.defvjp(_flash_fwd, _flash_bwd)


def blockwise_attention(q: jax.Array, k: jax.Array, v: jax.Array, segment_ids: jax.Array | None = None, *,
                        block_q: int = 512, block_k: int = 512) -> jax.Array:
    """q [B,T,H,D], k/v [B,T,KV,D], segment_ids int [B,T] or None -> [B,T,H,D] (see module docstring)."""
    b, t, h, d = q.shape
    kvh = k.shape[2]
    if h % kvh:
        raise ValueError(f"blockwise_attention: {h} query heads is not a multiple of {kvh} KV heads")
    bq, bk = min(block_q, t), min(block_k, t)
    tp = -(-t // bq) * bq
    tp = -(-tp // bk) * bk
    while tp % bq or tp % bk:  # lcm of the two block sizes
        tp += min(bq, bk)
    seg = jnp.ones((b, t), jnp.int32) if segment_ids is None else segment_ids.astype(jnp.int32)
    seg = _pad_to(seg, tp, 1)
    pos = jnp.broadcast_to(jnp.arange(tp, dtype=jnp.int32), (b, tp))
    qg = rearrange(_pad_to(q, tp, 1), "b t (k g) d -> b k g t d", k=kvh)
    kk = rearrange(_pad_to(k, tp, 1), "b t k d -> b k t d")
    vv = rearrange(_pad_to(v, tp, 1), "b t k d -> b k t d")
    out = _flash(bq, bk, qg, kk, vv, seg, pos)
    return rearrange(out, "b k g t d -> b t (k g) d")[:, :t]


@dataclass(frozen=True)
class BlockwiseCausal:
    """Flash-style causal attention; `state` is None or int [B, T] segment ids (threaded unchanged)."""

    block_q: int = 512
    block_k: int = 512

    def __post_init__(self):
        for f in ("block_q", "block_k"):
            if getattr(self, f) <= 0:
                raise ValueError(f"BlockwiseCausal.{f} must be > 0, got {getattr(self, f)}")

    def __call__(self, q, k, v, *, layer, state):
        return blockwise_attention(q, k, v, state, block_q=self.block_q, block_k=self.block_k), state


def segment_offsets(segment_ids: jax.Array, max_segments: int) -> tuple[jax.Array, jax.Array]:
    """Packed rows' segment ids int [B, T] (contiguous segments 1..k in order, 0 = padding) -> (seqlen int32
    [B, M], offsets int32 [B, M + 1]) in cuDNN's packed layout (M = max_segments): each present segment's
    length and first token, -1 for absent ones. Segments past M are not represented (they get no attention
    output); callers pass the packer's own bound (UpdateConfig.max_segments)."""
    ids = jnp.arange(1, max_segments + 1, dtype=jnp.int32)
    hit = segment_ids.astype(jnp.int32)[:, :, None] == ids  # [B, T, M]
    lens = jnp.sum(hit, axis=1, dtype=jnp.int32)
    starts = jnp.argmax(hit, axis=1).astype(jnp.int32)
    present = lens > 0
    seqlen = jnp.where(present, lens, -1)
    offsets = jnp.concatenate([jnp.where(present, starts, -1), jnp.full((lens.shape[0], 1), -1, jnp.int32)], 1)
    return seqlen, offsets


def cudnn_packed_attention(q, k, v, segment_ids, *, max_segments: int) -> jax.Array:
    """cuDNN flash attention over packed rows: q [B,T,H,D], k/v [B,T,KV,D] (GQA native), segment ids [B,T];
    causal within each segment. Padding tokens (segment 0) get output 0 (the dense reference lets them attend to
    themselves; their loss mask is 0 either way, and 0 keeps garbage out of the backward)."""
    # jax.nn.dot_product_attention does not expose cuDNN's packed (offsets) layout; it calls this same function.
    from jax._src.cudnn.fused_attention_stablehlo import MaskType, dot_product_attention as cudnn_dpa

    seqlen, offsets = segment_offsets(segment_ids, max_segments)
    # cuDNN's backward may leave dK / dV of tokens outside every segment unwritten (an H200 once gave a dK far off
    # the dense reference at one shape while out and dQ matched). Selecting the inputs makes the gradient at
    # padding exactly 0 whatever the kernel leaves there: select's VJP drops that cotangent.
    valid = (segment_ids > 0)[:, :, None, None]
    zero = jnp.zeros((), q.dtype)
    q, k, v = (jnp.where(valid, x, zero) for x in (q, k, v))
    out = cudnn_dpa(q, k, v, q_seqlen=seqlen, kv_seqlen=seqlen, q_offsets=offsets, kv_offsets=offsets,
                    scale=1.0 / float(q.shape[-1]) ** 0.5, mask_type=MaskType.PADDING_CAUSAL, qkv_layout="BTNH")
    return jnp.where(valid, out, jnp.zeros((), out.dtype))


@dataclass(frozen=True)
class CudnnCausal:
    """cuDNN fused causal attention (NVIDIA GPUs only); with segment ids (`state`, packed rows) the packed
    layout (`cudnn_packed_attention`, at most `max_segments` segments per row)."""

    max_segments: int = 16

    def __call__(self, q, k, v, *, layer, state):
        if state is not None:
            return cudnn_packed_attention(q, k, v, state, max_segments=self.max_segments), state
        return jax.nn.dot_product_attention(q, k, v, is_causal=True, implementation="cudnn"), state


ATTENTION_KINDS = ("auto", "dense", "blockwise", "cudnn")
# "auto" for packed rows on GPUs: blockwise until cuDNN's packed layout passes its GPU test (pytest -m gpu
# tests/unit/model/test_flash_attention.py) on an H100/H200. An H200 measured the 1.5B update at 45.5% MFU with it vs
# 17.6% blockwise (same loss to 4 digits; docs/performance.md); this one line makes it the default.
CUDNN_PACKED_DEFAULT = False


def training_attention(kind: str = "auto", *, packed: bool = False, block_q: int = 512,
                       block_k: int = 512, max_segments: int = 16) -> AttentionFn:
    """The training-time attention back-end named `kind` (see module docstring); "auto" = cudnn on GPU for
    unpacked rows, blockwise otherwise (cuDNN's packed layout, kind="cudnn" with packed rows, has not been run
    on a GPU yet: it becomes the packed default only once a GPU run shows it correct and faster)."""
    if kind not in ATTENTION_KINDS:
        raise ValueError(f"attention kind must be one of {ATTENTION_KINDS}, got {kind!r}")
    if kind == "auto":
        kind = "cudnn" if (jax.default_backend() == "gpu" and (CUDNN_PACKED_DEFAULT or not packed)) else "blockwise"
    if kind == "dense":
        return DenseCausal()
    if kind == "cudnn":
        return CudnnCausal(max_segments=max_segments)
    return BlockwiseCausal(block_q, block_k)
