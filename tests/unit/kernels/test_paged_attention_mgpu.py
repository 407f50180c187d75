"""memjax.kernels.paged_attention_mgpu (Pallas Mosaic GPU decode kernel) vs the engine's pure-JAX reference.

On CPU the kernel runs in Mosaic GPU interpret mode (`plgpu.InterpretGPUParams`: simulated SMEM, TMA
copies, barriers and wgmma), the same kernel body the GPU compiles. Awkward inputs as in
test_paged_attention_kernel.py: scattered page tables, kv_len not a multiple of the page size, kv_len 0
(exact zeros) and 1, a decode query behind kv_len (q_pos < kv_len - 1: the causal limit), G = 1 and
G > 1 (not a power of two), split-K with 1/2/3 splits over block counts they do not divide, key blocks
of one and of several pages, `layer` traced (the tiny model's scan over layers). Tolerances as there:
fp32 <= 1e-5, bf16 <= 2e-2 absolute. The GPU path is lowered to the Mosaic GPU custom call for an
abstract H100 (layout inference and the Mosaic GPU module are built; PTX compilation and a run need a
GPU: the gpu-marked test, skipped elsewhere).
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from memjax.engine.config import EngineConfig, KernelOptions
from memjax.engine.paged_kv import PagedAttention
from memjax.kernels import engine_attend, paged_attention, paged_attention_ref
from memjax.kernels.paged_attention import resolve_impl
from memjax.kernels.paged_attention_mgpu import mosaic_supported, paged_attention_mosaic
from memjax.model import init_model, presets

from test_paged_attention_kernel import _FAST, _maxdiff, _problem

_reference = jax.jit(paged_attention_ref, compiler_options=_FAST)


@functools.partial(jax.jit, static_argnames=("num_splits", "block_k"), compiler_options=_FAST)
def _mosaic(q, k, v, layer, pt, q_pos, kv_len, num_splits=1, block_k=64):
    return paged_attention_mosaic(q, k, v, layer, pt, q_pos, kv_len, num_splits=num_splits, block_k=block_k,
                                  interpret=True)


# b = 5, S = 8, MP = 5: kv_len 37 (5 pages, last partial), 0 (padding row), 1, 16 (exactly 2 pages), 11;
# row 3's query sits at q_pos = 13 < kv_len - 1 (keys 14, 15 invisible).
LENS, Q_BACK = [37, 0, 1, 16, 11], [1, 1, 1, 3, 1]


@pytest.mark.parametrize("h,kv,splits,block_k", [
    (2, 2, 1, 16),   # G = 1, blocks of 2 pages (3 blocks for 5 pages)
    (6, 2, 2, 8),    # G = 3, one page per block, 5 blocks split 3 + 2
    (4, 1, 3, 16),   # G = 4, 3 blocks split 1 + 1 + 1; kv_len 1 and 11 -> empty splits
])
def test_decode_fp32_matches_reference(h, kv, splits, block_k):
    q, k, v, pt, q_pos, kv_len = _problem(h * 10 + splits, b=5, t=1, h=h, kv=kv, s=8, d=16, mp=5, kv_len=LENS,
                                          q_back=Q_BACK)
    layer = jnp.int32(1)
    out = _mosaic(q, k, v, layer, pt, q_pos, kv_len, num_splits=splits, block_k=block_k)
    ref = _reference(q, k, v, layer, pt, q_pos, kv_len)
    assert out.shape == q.shape and out.dtype == q.dtype
    assert _maxdiff(out, ref) <= 1e-5
    assert np.all(np.asarray(out)[1] == 0)  # kv_len = 0: no visible key -> exact zeros
    np.testing.assert_allclose(np.asarray(out)[2, 0], np.repeat(np.asarray(v)[1, :, int(pt[2, 0]), 0], h // kv, 0),
                               atol=1e-6)  # kv_len = 1: the single key's value
    assert float(jnp.max(jnp.abs(ref))) > 0.3  # not vacuous


@pytest.mark.parametrize("splits,block_k", [(3, 16), (1, 32)])
def test_bf16_within_stated_tolerance(splits, block_k):
    q, k, v, pt, q_pos, kv_len = _problem(11 + splits, b=4, t=1, h=6, kv=2, s=16, d=16, mp=4, kv_len=[60, 0, 9, 33],
                                          dtype=jnp.bfloat16)
    out = _mosaic(q, k, v, jnp.int32(0), pt, q_pos, kv_len, num_splits=splits, block_k=block_k)
    ref = _reference(q, k, v, jnp.int32(0), pt, q_pos, kv_len)
    assert out.dtype == jnp.bfloat16
    assert _maxdiff(out, ref) <= 2e-2
    assert np.all(np.asarray(out.astype(jnp.float32))[1] == 0)
    assert float(jnp.max(jnp.abs(ref.astype(jnp.float32)))) > 0.3


def test_tiny_model_decode_through_engine_back_end():
    """A tiny Qwen2 (G = 2, D = 16) with engine_attend(impl="mosaic") as PagedAttention's `attend`: the
    prefill chunk takes impl="auto" (the reference on CPU), the decode steps the Mosaic kernel with `layer`
    traced by the model's scan over layers; logits vs the all-reference run."""
    model = init_model(presets.get("tiny"), seed=5)
    cfg = model.cfg
    ids = np.random.default_rng(2).integers(0, cfg.vocab_size, (2, 12))
    s = 8
    pt = jnp.asarray([[3, 1], [2, 4]], jnp.int32)
    shape = (cfg.num_layers, cfg.num_kv_heads, 5, s, cfg.head_dim)

    @functools.partial(jax.jit, static_argnames=("attend",), compiler_options=_FAST)
    def fwd(ids, start, n_valid, state, attend):
        pos = start[:, None] + jnp.arange(ids.shape[1], dtype=jnp.int32)[None]
        att = PagedAttention(pt, start, n_valid, attend=attend)
        return model.forward(ids, pos, attention=att, state=state)

    def run(attend):
        state = (jnp.zeros(shape), jnp.zeros(shape))
        chunk = jnp.asarray(ids[:, :9], jnp.int32)  # second sequence: 7 real tokens, 2 padded
        logits, state = fwd(chunk, jnp.zeros((2,), jnp.int32), jnp.asarray([9, 7], jnp.int32), state, attend)
        outs = [np.asarray(logits)[0]]
        for step in range(2):  # decode across the page boundary at 8 for the second sequence
            start = jnp.asarray([9 + step, 7 + step], jnp.int32)
            tok = jnp.asarray(ids[[0, 1], [9 + step, 7 + step]][:, None], jnp.int32)
            logits, state = fwd(tok, start, jnp.ones((2,), jnp.int32), state, attend)
            outs.append(np.asarray(logits)[:, 0])
        return outs

    got = run(engine_attend(impl="mosaic", num_splits=2, interpret=True))
    ref = run(engine_attend(impl="reference"))
    assert len(got) == 3
    for a, b in zip(got, ref):
        assert np.abs(a - b).max() <= 1e-5


def _lower_for_h100(b, h, pool, splits, max_pages=512):
    """jit(scan over layers of the kernel).lower for an abstract H100 -> (Mosaic GPU calls, Triton calls)."""
    from jax.sharding import AbstractDevice, AbstractMesh
    dev = AbstractDevice(device_kind="NVIDIA H100 80GB HBM3", num_cores=None, platform="gpu")
    sds = jax.ShapeDtypeStruct

    def f(q, k, v, pt, q_pos, kv_len):
        def step(c, layer):
            return c + paged_attention(q, k, v, layer, pt, q_pos, kv_len, impl="mosaic", interpret=False,
                                       num_splits=splits), None
        return jax.lax.scan(step, jnp.zeros_like(q), jnp.arange(pool[0], dtype=jnp.int32))[0]

    specs = (sds((b, 1, h, pool[-1]), jnp.bfloat16), sds(pool, jnp.bfloat16), sds(pool, jnp.bfloat16),
             sds((b, max_pages), jnp.int32), sds((b, 1), jnp.int32), sds((b,), jnp.int32))
    with jax.sharding.use_abstract_mesh(AbstractMesh((1,), ("x",), abstract_device=dev)):
        text = jax.jit(f).trace(*specs).lower(lowering_platforms=("cuda",)).as_text()
    return text.count("@mosaic_gpu_v2"), text.count("triton")


def test_lowers_to_mosaic_gpu_for_h100():
    """Pallas -> the Mosaic GPU custom call for an abstract H100 (its module built: layout inference, TMA
    descriptors, wgmma), inside a scan over layers; no Triton call. PTX and a run are unchecked here."""
    assert _lower_for_h100(64, 28, (2, 4, 4096, 16, 128), 1) == (1, 0)      # 7B-shaped decode (G = 7)
    assert _lower_for_h100(64, 12, (2, 2, 4096, 16, 128), 4) == (1, 0)      # 1.5B-shaped, split-K
    assert _lower_for_h100(8, 28, (28, 4, 65536, 16, 128), 2) == (1, 0)     # 3.8e9-element pool


def test_validation_and_impl_choice():
    q, k, v, pt, q_pos, kv_len = _problem(0, b=2, t=1, h=4, kv=2, s=8, d=16, mp=2, kv_len=[5, 3])
    on_gpu = jax.default_backend() == "gpu"
    assert resolve_impl("mosaic") == "mosaic"
    assert resolve_impl("auto", 16, 128) == ("pallas" if on_gpu else "reference")  # the default is unchanged
    assert EngineConfig(kernels=KernelOptions(attention="mosaic")).kernels.attention == "mosaic"
    assert mosaic_supported(16, 128, jnp.bfloat16, 7) and mosaic_supported(64, 128, jnp.float16)
    assert not mosaic_supported(16, 128, jnp.float32)       # fp32 wgmma would be TF32
    assert not mosaic_supported(16, 96, jnp.bfloat16)       # D not a multiple of 64
    assert not mosaic_supported(16, 128, jnp.bfloat16, 65)  # G over one wgmma row block
    assert "mosaic_gpu" not in str(jax.make_jaxpr(lambda *a: paged_attention(*a))(q, k, v, 0, pt, q_pos, kv_len))
    with pytest.raises(ValueError, match="decode-only"):
        paged_attention(jnp.concatenate([q, q], 1), k, v, 0, pt, jnp.concatenate([q_pos, q_pos], 1), kv_len,
                        impl="mosaic", interpret=True)
    with pytest.raises(ValueError, match="bf16/f16 pool"):
        paged_attention(q, k, v, 0, pt, q_pos, kv_len, impl="mosaic", interpret=False)
    with pytest.raises(ValueError, match="32 bytes"):
        paged_attention(q, k[..., :4, :], v[..., :4, :], 0, pt, q_pos, kv_len, impl="mosaic", interpret=True)
    with pytest.raises(ValueError, match="block_k"):
        paged_attention_mosaic(q, k, v, 0, pt, q_pos, kv_len, block_k=0, interpret=True)
    with pytest.raises(ValueError, match=r"reference\|pallas\|mosaic\|auto"):
        EngineConfig(kernels=KernelOptions(attention="triton"))


@pytest.mark.gpu
@pytest.mark.skipif(jax.default_backend() != "gpu", reason="the compiled Mosaic GPU kernel needs an NVIDIA GPU "
                    "(Hopper sm90+); on CPU it runs in interpret mode in the tests above")
@pytest.mark.parametrize("h,kv,splits", [(28, 4, 1), (12, 2, 4), (8, 8, 3)])
def test_compiled_matches_reference_on_gpu(h, kv, splits):
    """Compiled bf16 kernel at engine shapes (S = 16, D = 128) vs the reference: 7B / 1.5B-shaped GQA and
    G = 1, split-K, ragged kv_len with a 0 and a 1, scattered pages."""
    lens = [1000, 0, 1, 512, 77, 1023, 16, 300]
    q, k, v, pt, q_pos, kv_len = _problem(h + splits, b=8, t=1, h=h, kv=kv, s=16, d=128, mp=64, kv_len=lens,
                                          dtype=jnp.bfloat16)
    out = jax.jit(functools.partial(paged_attention, impl="mosaic", num_splits=splits))(
        q, k, v, jnp.int32(1), pt, q_pos, kv_len)
    ref = jax.jit(paged_attention_ref)(q, k, v, jnp.int32(1), pt, q_pos, kv_len)
    assert _maxdiff(out, ref) <= 2e-2
    assert np.all(np.asarray(out.astype(jnp.float32))[1] == 0)
