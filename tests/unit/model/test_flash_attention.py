"""memjax.model.flash_attention against the dense reference (forward and gradients), and its memory."""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from memjax.model import presets
from memjax.model.attention import DenseCausal
from memjax.model.flash_attention import (BlockwiseCausal, CudnnCausal, blockwise_attention,
                                          cudnn_packed_attention, segment_offsets, training_attention)
from memjax.model.qwen2 import abstract_model, init_model

jax.config.update("jax_default_matmul_precision", "highest")


def _qkv(rng, b, t, h, kv, d, dtype=jnp.float32):
    f = lambda *s: jnp.asarray(rng.normal(size=s), jnp.float32).astype(dtype)
    return f(b, t, h, d), f(b, t, kv, d), f(b, t, kv, d), f(b, t, h, d)


def _segments(b, t):
    s = np.zeros((b, t), np.int32)
    s[:, : t // 4] = 1
    s[:, t // 4: (3 * t) // 4] = 2
    s[0, (3 * t) // 4:] = 3  # row 0 packs a third segment; row 1 ends in padding (segment 0)
    return jnp.asarray(s)


@pytest.mark.parametrize("b,t,h,kv,d,bq,bk,packed", [
    (2, 37, 4, 2, 8, 8, 16, True),    # T not a multiple of the blocks; packed + padding
    (1, 64, 4, 1, 16, 16, 16, False),  # plain causal, MQA
    (2, 50, 6, 3, 8, 32, 8, True),     # block_q > block_k
    (1, 24, 2, 2, 4, 512, 512, False),  # blocks larger than T
])
def test_matches_dense_forward_and_gradients(b, t, h, kv, d, bq, bk, packed):
    q, k, v, w = _qkv(np.random.default_rng(t), b, t, h, kv, d)
    seg = _segments(b, t) if packed else None
    dense = lambda q, k, v: DenseCausal()(q, k, v, layer=0, state=seg)[0]
    flash = lambda q, k, v: BlockwiseCausal(bq, bk)(q, k, v, layer=0, state=seg)[0]
    np.testing.assert_allclose(flash(q, k, v), dense(q, k, v), atol=2e-6, rtol=0)
    gd = jax.grad(lambda *a: (dense(*a) * w).sum(), argnums=(0, 1, 2))(q, k, v)
    gf = jax.grad(lambda *a: (flash(*a) * w).sum(), argnums=(0, 1, 2))(q, k, v)
    for name, x, y in zip("qkv", gf, gd):
        np.testing.assert_allclose(x, y, atol=5e-6, rtol=0, err_msg=f"d{name}")


def test_bfloat16_close_to_dense():
    q, k, v, _ = _qkv(np.random.default_rng(1), 2, 96, 4, 2, 16, jnp.bfloat16)
    seg = _segments(2, 96)
    a = blockwise_attention(q, k, v, seg, block_q=32, block_k=32).astype(jnp.float32)
    r = DenseCausal()(q, k, v, layer=0, state=seg)[0].astype(jnp.float32)
    assert a.dtype == jnp.float32 and float(jnp.abs(a - r).max()) < 2e-2


def test_model_forward_with_blockwise_equals_dense():
    cfg = presets.get("tiny")
    m = init_model(cfg, seed=0)
    ids = jnp.asarray(np.random.default_rng(0).integers(0, cfg.vocab_size, (2, 40)), jnp.int32)
    ref, _ = m.forward(ids)
    got, _ = m.forward(ids, attention=BlockwiseCausal(16, 16))
    np.testing.assert_allclose(got, ref, atol=2e-5, rtol=0)


def test_no_quadratic_tensor_in_compiled_7b_width_training_step():
    """One Qwen2.5-7B-width layer, bf16, T=8192, value-and-grad compiled on CPU with abstract inputs:
    the dense reference materialises f32 [1, 4, 7, 8192, 8192] score tensors (~25 GiB of temporaries);
    the blockwise path has no T x T tensor and its temporaries stay under 4 GiB (3.24 GiB: XLA:CPU runs the
    layer's bf16 weight-gradient dots in f32, on f32 copies of their [T, 18944] operands; 2.25 GiB while the
    projections contracted [B, T] as two dimensions, memjax/model/qwen2.py `decoder_layer`)."""
    cfg = presets.get("qwen2.5-7b").replace(num_layers=1, dtype="bfloat16", param_dtype="bfloat16")
    gd, st = nnx.split(abstract_model(cfg))

    def loss(st, ids):
        h, _ = nnx.merge(gd, st).forward(ids, attention=BlockwiseCausal(), return_hidden=True)
        return h.astype(jnp.float32).mean()

    c = jax.jit(jax.grad(loss)).lower(st, jax.ShapeDtypeStruct((1, 8192), jnp.int32)).compile()
    assert not re.findall(r"\[[0-9,]*8192,8192[0-9,]*\]", c.as_text())
    assert c.memory_analysis().temp_size_in_bytes < 4 * 2**30


def test_training_attention_selection_and_errors():
    assert isinstance(training_attention("dense"), DenseCausal)
    assert isinstance(training_attention("blockwise", block_q=64), BlockwiseCausal)
    assert isinstance(training_attention("cudnn"), CudnnCausal)
    want = CudnnCausal if jax.default_backend() == "gpu" else BlockwiseCausal
    assert isinstance(training_attention("auto"), want)
    assert isinstance(training_attention("auto", packed=True), BlockwiseCausal)
    assert training_attention("cudnn", packed=True, max_segments=5) == CudnnCausal(max_segments=5)
    with pytest.raises(ValueError, match="attention kind"):
        training_attention("flash3")
    with pytest.raises(ValueError, match="block_q"):
        BlockwiseCausal(block_q=0)
    with pytest.raises(ValueError, match="multiple"):
        blockwise_attention(*_qkv(np.random.default_rng(0), 1, 8, 3, 2, 4)[:3])


def test_segment_offsets_cudnn_packed_layout():
    seg = jnp.asarray([[1, 1, 1, 2, 2, 3, 0, 0], [1, 1, 1, 1, 1, 1, 1, 1], [0] * 8], jnp.int32)
    seqlen, off = segment_offsets(seg, 4)
    np.testing.assert_array_equal(seqlen, [[3, 2, 1, -1], [8, -1, -1, -1], [-1, -1, -1, -1]])
    np.testing.assert_array_equal(off, [[0, 3, 5, -1, -1], [0, -1, -1, -1, -1], [-1, -1, -1, -1, -1]])


@pytest.mark.gpu
@pytest.mark.skipif(jax.default_backend() != "gpu", reason="cuDNN flash attention needs an NVIDIA GPU (CPU run)")
@pytest.mark.parametrize("b,t,h,kv,d", [(2, 512, 12, 2, 128), (3, 1024, 28, 4, 128)])
def test_cudnn_packed_matches_dense_on_gpu(b, t, h, kv, d):
    """cuDNN's packed layout vs the dense reference on segment tokens (bf16 inputs, f32 reference)."""
    rng = np.random.default_rng(t)
    q, k, v, w = _qkv(rng, b, t, h, kv, d, jnp.bfloat16)
    s = np.zeros((b, t), np.int32)
    for r in range(b):  # 1-4 segments of random lengths, then padding
        cuts = np.sort(rng.choice(np.arange(16, t - 16), size=r + 1, replace=False))
        for i, (a, e) in enumerate(zip(np.r_[0, cuts[:-1]], cuts)):
            s[r, a:e] = i + 1
    seg = jnp.asarray(s)
    valid = (seg > 0)[:, :, None, None]
    f32 = lambda *a: tuple(x.astype(jnp.float32) for x in a)
    dense = lambda q, k, v: jnp.where(valid, DenseCausal()(*f32(q, k, v), layer=0, state=seg)[0], 0.0)
    cud = lambda q, k, v: cudnn_packed_attention(q, k, v, seg, max_segments=8).astype(jnp.float32)
    o, r = jax.jit(cud)(q, k, v), jax.jit(dense)(q, k, v)
    rel = lambda x, y: float(jnp.linalg.norm((x - y).ravel()) / jnp.linalg.norm(y.ravel()))
    assert rel(o, r) < 1e-2
    assert float(jnp.abs(jnp.where(valid, 0.0, o)).max()) == 0.0  # padding rows are zero
    gc = jax.jit(jax.grad(lambda *a: (cud(*a) * w).sum(), argnums=(0, 1, 2)))(q, k, v)
    gd = jax.jit(jax.grad(lambda *a: (dense(*a) * w.astype(jnp.float32)).sum(), argnums=(0, 1, 2)))(q, k, v)
    for name, x, y in zip("qkv", gc, gd):
        x, y = x.astype(jnp.float32), y.astype(jnp.float32)
        pad = float(jnp.abs(jnp.where(valid, 0.0, x)).max())
        assert pad == 0.0, f"d{name} at padding tokens: max |.| {pad}"  # the reference's is 0 there
        assert rel(x, y) < 2e-2, f"d{name}"


@pytest.mark.gpu
@pytest.mark.parametrize("kind,packed", [("blockwise", False), ("blockwise", True), ("cudnn", False)])
def test_training_attention_matches_dense_bf16_gpu(kind, packed):
    """GPU tier: the training back-ends vs the dense fp32 reference at a 1.5B layer's heads, bf16, fwd + grads."""
    gpu = jax.default_backend() == "gpu"
    if kind == "cudnn" and not gpu:
        pytest.skip("cuDNN attention exists only on NVIDIA GPUs (MEMJAX_GPU_TIER_ANYWHERE run on CPU)")
    b, t, h, kv, d = (2, 2048, 12, 2, 128) if gpu else (2, 256, 4, 2, 16)
    q, k, v, w = _qkv(np.random.default_rng(7), b, t, h, kv, d, jnp.bfloat16)
    seg = _segments(b, t) if packed else None
    fn = training_attention(kind, packed=packed, block_q=128 if gpu else 64, block_k=128 if gpu else 64)
    f32 = lambda *a: tuple(x.astype(jnp.float32) for x in a)  # noqa: E731
    got = lambda q, k, v: fn(q, k, v, layer=0, state=seg)[0].astype(jnp.float32)  # noqa: E731
    ref = lambda q, k, v: DenseCausal()(*f32(q, k, v), layer=0, state=seg)[0]  # noqa: E731
    keep = jnp.ones((b, t, 1, 1), bool) if seg is None else (seg > 0)[:, :, None, None]
    rel = lambda x, y: float(jnp.linalg.norm(jnp.where(keep, x - y, 0).ravel())  # noqa: E731
                             / jnp.linalg.norm(jnp.where(keep, y, 0).ravel()))
    assert rel(jax.jit(got)(q, k, v), jax.jit(ref)(q, k, v)) < 1e-2
    loss = lambda f: lambda *a: (jnp.where(keep, f(*a), 0) * w.astype(jnp.float32)).sum()  # noqa: E731
    gg = jax.jit(jax.grad(loss(got), argnums=(0, 1, 2)))(q, k, v)
    gr = jax.jit(jax.grad(loss(ref), argnums=(0, 1, 2)))(q, k, v)
    for name, x, y in zip("qkv", gg, gr):
        assert rel(x.astype(jnp.float32), y) < 2e-2, f"d{name}"
