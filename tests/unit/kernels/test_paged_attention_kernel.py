"""memjax.kernels.paged_attention (Pallas, interpret mode on CPU) vs the engine's pure-JAX reference.

Awkward inputs on purpose: scattered non-contiguous page tables, kv_len not a multiple of the page size,
kv_len = 0 (padding rows: exact zeros) and kv_len = 1, G = 1 and G > 1 (G not a power of two, so rows
are padded), decode (t = 1) and chunked prefill (t > 1, q_pos offset into the sequence, padded query
rows past kv_len, several row blocks), split-K with 1/2/3 splits over page counts they do not divide,
and `layer` traced (inside the tiny model's scan over layers, as the engine calls it).
Tolerances: fp32 <= 1e-5 absolute; bf16 kernel vs the reference on the same bf16 inputs <= 2e-2
absolute (outputs are O(1): one bf16 ulp at 1-2 is 7.8e-3, the largest error seen; the kernel rounds
p to bf16 for the PV dot and both round the output to bf16).
A tiny Qwen2 forward through the engine's PagedAttention back-end checks the plug-in end to end, and
the GPU path is lowered to Triton IR for an abstract H100 (PTX compilation and execution need a GPU
and are not checked here).
"""

import functools
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from memjax.engine.paged_kv import PagedAttention
from memjax.kernels import engine_attend, paged_attention, paged_attention_ref
from memjax.kernels.paged_attention import combine_splits, resolve_impl, suggest_num_splits
from memjax.model import init_model, presets


def _problem(seed, *, b, t, h, kv, s, d, mp, kv_len, n_layers=2, dtype=jnp.float32, q_back=None):
    """Random pools [L, KV, P, S, D] with each sequence's pages scattered over the pool.

    q_pos[i] = kv_len[i] - q_back[i] + arange(t): q_back = t gives a chunk ending at kv_len (prefill);
    q_back < t leaves trailing padded query rows past kv_len (as the engine's fixed-size chunks do).
    """
    r = np.random.default_rng(seed)
    n_pages = 1 + b * mp + 3  # null page + every sequence's pages + a few unused
    pt = r.permutation(np.arange(1, n_pages))[: b * mp].reshape(b, mp).astype(np.int32)
    kv_len = np.asarray(kv_len, np.int32)
    pt[np.arange(mp)[None, :] * s >= np.maximum(kv_len, 1)[:, None]] = 0  # unused entries -> null page
    shape = (n_layers, kv, n_pages, s, d)
    k, v = (jnp.asarray(r.normal(size=shape), jnp.float32).astype(dtype) for _ in range(2))
    q = jnp.asarray(r.normal(size=(b, t, h, d)), jnp.float32).astype(dtype)
    back = np.full(b, t) if q_back is None else np.asarray(q_back)
    q_pos = (kv_len - back)[:, None] + np.arange(t)[None]
    return q, k, v, jnp.asarray(pt), jnp.asarray(q_pos, jnp.int32), jnp.asarray(kv_len)


_FAST = {"xla_backend_optimization_level": 0, "xla_llvm_disable_expensive_passes": True}  # CPU compile time


@functools.partial(jax.jit, static_argnames=("num_splits", "block_q"), compiler_options=_FAST)
def _kernel(q, k, v, layer, pt, q_pos, kv_len, num_splits=1, block_q=64):
    # (interpret mode: the kernel runs as XLA ops on CPU; most of a test's time is compiling them)
    return paged_attention(q, k, v, layer, pt, q_pos, kv_len, impl="pallas", num_splits=num_splits,
                           block_q=block_q, interpret=True)


_reference = jax.jit(paged_attention_ref, compiler_options=_FAST)


def _maxdiff(a, b):
    return float(jnp.max(jnp.abs(jnp.asarray(a, jnp.float32) - jnp.asarray(b, jnp.float32))))


# b = 5 sequences, S = 4, MP = 5 pages: kv_len 17 (5 pages, last one partial), 0 (padding row), 1,
# 8 (exactly 2 pages), 11; 5 pages split 2 -> 3 + 2, split 3 -> 2 + 2 + 1; kv_len 1 -> empty splits.
DECODE_LENS = [17, 0, 1, 8, 11]


@pytest.mark.parametrize("h,kv,splits", [(2, 2, 1), (6, 2, 2), (4, 1, 3)])
def test_decode_fp32_matches_reference(h, kv, splits):
    q, k, v, pt, q_pos, kv_len = _problem(h * 10 + splits, b=5, t=1, h=h, kv=kv, s=4, d=16, mp=5,
                                          kv_len=DECODE_LENS)
    layer = jnp.int32(1)
    out = _kernel(q, k, v, layer, pt, q_pos, kv_len, num_splits=splits)
    ref = _reference(q, k, v, layer, pt, q_pos, kv_len)
    assert out.shape == q.shape and out.dtype == q.dtype
    assert _maxdiff(out, ref) <= 1e-5
    assert np.all(np.asarray(out)[1] == 0)  # kv_len = 0: no visible key -> exact zeros
    np.testing.assert_allclose(np.asarray(out)[2, 0], np.repeat(np.asarray(v)[1, :, int(pt[2, 0]), 0], h // kv, 0),
                               atol=1e-6)  # kv_len = 1: the single key's value
    assert float(jnp.max(jnp.abs(ref))) > 0.3  # not vacuous


@pytest.mark.parametrize("t,h,kv,splits,block_q,q_back", [
    (5, 6, 2, 2, 64, [5, 5, 3, 5]),    # chunk ending at kv_len; row 2 has 2 padded queries past kv_len
    (9, 8, 2, 3, 16, [9, 4, 9, 9]),    # R = 36 rows -> 3 row blocks of 16 (causal page skipping per block)
    (3, 2, 2, 2, 16, [3, 3, 3, 3]),    # G = 1
])
def test_chunked_prefill_fp32_matches_reference(t, h, kv, splits, block_q, q_back):
    lens = [18, 9, 7, 13]  # q_pos offsets 13, 4, ... into the sequence (earlier chunks already cached)
    q, k, v, pt, q_pos, kv_len = _problem(t * 100 + splits, b=4, t=t, h=h, kv=kv, s=4, d=8, mp=5,
                                          kv_len=lens, n_layers=3, q_back=q_back)
    layer = jnp.int32(2)
    out = _kernel(q, k, v, layer, pt, q_pos, kv_len, num_splits=splits, block_q=block_q)
    ref = _reference(q, k, v, layer, pt, q_pos, kv_len)
    assert _maxdiff(out, ref) <= 1e-5
    assert float(jnp.max(jnp.abs(ref))) > 0.3


@pytest.mark.parametrize("t,splits", [(1, 3), (4, 1)])
def test_bf16_within_stated_tolerance(t, splits):
    q, k, v, pt, q_pos, kv_len = _problem(11 + t, b=4, t=t, h=6, kv=2, s=8, d=16, mp=4, kv_len=[30, 0, 9, 17],
                                          dtype=jnp.bfloat16)
    out = _kernel(q, k, v, jnp.int32(0), pt, q_pos, kv_len, num_splits=splits)
    ref = _reference(q, k, v, jnp.int32(0), pt, q_pos, kv_len)
    assert out.dtype == jnp.bfloat16
    assert _maxdiff(out, ref) <= 2e-2
    assert np.all(np.asarray(out.astype(jnp.float32))[1] == 0)


@pytest.mark.parametrize("t,splits", [(1, 2), (4, 1)])
def test_float8_pool_matches_reference(t, splits):
    """A float8_e4m3fn pool (EngineConfig.kv.kv_dtype): q stays bf16, the kernel upcasts each page; the reference
    reads the same stored values in fp32 (tolerance as bf16: the kernel's dots run in bf16)."""
    q, k, v, pt, q_pos, kv_len = _problem(21 + t, b=4, t=t, h=6, kv=2, s=8, d=16, mp=4, kv_len=[30, 0, 9, 17],
                                          dtype=jnp.bfloat16)
    k, v = k.astype(jnp.float8_e4m3fn), v.astype(jnp.float8_e4m3fn)
    out = _kernel(q, k, v, jnp.int32(1), pt, q_pos, kv_len, num_splits=splits)
    ref = _reference(q, k, v, jnp.int32(1), pt, q_pos, kv_len)
    assert out.dtype == jnp.bfloat16
    assert _maxdiff(out, ref) <= 2e-2
    assert np.all(np.asarray(out.astype(jnp.float32))[1] == 0)
    jaxpr = str(jax.make_jaxpr(lambda *a: paged_attention(*a, impl="pallas"))(q, k, v, 0, pt, q_pos, kv_len))
    f8 = set(re.findall(r"f8_e4m3fn\[([0-9,]+)\]", jaxpr))  # float8 values: the pools and one loaded page only
    assert f8 == {",".join(map(str, k.shape)), "8,16"}, f8  # (q cast to float8 would add its own shape)


def test_combine_splits_handles_empty_partitions():
    m = jnp.asarray([[-1e30, 0.5, 2.0], [-1e30, -1e30, -1e30]], jnp.float32).T[None]  # [1, n=3, R=2]
    l = jnp.asarray([[0.0, 2.0, 1.0], [0.0, 0.0, 0.0]], jnp.float32).T[None]
    acc = jnp.stack([jnp.zeros((2, 4)), jnp.ones((2, 4)) * 2.0, jnp.ones((2, 4)) * 3.0])[None]
    acc = acc.at[:, :, 1].set(0.0)  # empty partitions carry acc = 0
    out = np.asarray(combine_splits(m, l, acc))
    w = np.exp(np.array([0.5, 2.0]) - 2.0)
    np.testing.assert_allclose(out[0, 0], (w[0] * 2 + w[1] * 3) / (w[0] * 2 + w[1] * 1) * np.ones(4), rtol=1e-6)
    assert np.all(out[0, 1] == 0)


def test_tiny_model_forward_through_engine_back_end():
    """Chunked prefill then paged decode of a tiny Qwen2 with the kernel as PagedAttention's `attend`
    (G = 2, num_splits 1: the default); the model's lax.scan over layers passes `layer` traced, as the
    engine does."""
    model = init_model(presets.get("tiny"), seed=5)
    cfg = model.cfg
    ids = np.random.default_rng(2).integers(0, cfg.vocab_size, (2, 12))
    s, mp = 4, 4
    pt = jnp.asarray([[7, 2, 5, 0], [3, 8, 1, 6]], jnp.int32)
    shape = (cfg.num_layers, cfg.num_kv_heads, 9, s, cfg.head_dim)

    @functools.partial(jax.jit, static_argnames=("attend",), compiler_options=_FAST)
    def fwd(ids, start, n_valid, state, attend):
        pos = start[:, None] + jnp.arange(ids.shape[1], dtype=jnp.int32)[None]
        att = PagedAttention(pt, start, n_valid, attend=attend)
        return model.forward(ids, pos, attention=att, state=state)

    def run(attend):
        state = (jnp.zeros(shape), jnp.zeros(shape))
        outs = []
        # prefill chunks of 6 (the second sequence's second chunk has 2 padded tokens), then decode
        for lo, n in ((0, (6, 6)), (6, (4, 2))):
            chunk = jnp.asarray(ids[:, lo:lo + 6], jnp.int32)
            logits, state = fwd(chunk, jnp.full((2,), lo, jnp.int32), jnp.asarray(n, jnp.int32), state, attend)
            outs.append(np.asarray(logits)[0, :n[0]])
        for step in range(2):
            start = jnp.asarray([10 + step, 8 + step], jnp.int32)
            tok = jnp.asarray(ids[[0, 1], [10 + step, 8 + step]][:, None], jnp.int32)
            logits, state = fwd(tok, start, jnp.ones((2,), jnp.int32), state, attend)
            outs.append(np.asarray(logits)[:, 0])
        return outs

    got = run(engine_attend(impl="pallas", num_splits=1, interpret=True))
    ref = run(engine_attend(impl="reference"))
    assert len(got) == 4
    for a, b in zip(got, ref):
        assert np.abs(a - b).max() <= 1e-5


def test_pallas_lowers_to_triton_ir_for_gpu():
    """Pallas -> Triton IR for an abstract H100, inside a scan over layers as the engine calls it; decode,
    split-K and chunked prefill, and a pool over 2^31 elements (64-bit offsets). PTX/run unchecked."""
    from jax.sharding import AbstractDevice, AbstractMesh
    dev = AbstractDevice(device_kind="NVIDIA H100 80GB HBM3", num_cores=None, platform="gpu")
    sds = jax.ShapeDtypeStruct

    def lower(b, t, h, pool, splits, pool_dtype=jnp.bfloat16):
        L = pool[0]

        def f(q, k, v, pt, q_pos, kv_len):
            def step(c, layer):
                return c + paged_attention(q, k, v, layer, pt, q_pos, kv_len, impl="pallas", interpret=False,
                                           num_splits=splits), None
            return jax.lax.scan(step, jnp.zeros_like(q), jnp.arange(L, dtype=jnp.int32))[0]

        specs = (sds((b, t, h, pool[-1]), jnp.bfloat16), sds(pool, pool_dtype), sds(pool, pool_dtype),
                 sds((b, 512), jnp.int32), sds((b, t), jnp.int32), sds((b,), jnp.int32))
        with jax.sharding.use_abstract_mesh(AbstractMesh((1,), ("x",), abstract_device=dev)):
            text = jax.jit(f).trace(*specs).lower(lowering_platforms=("cuda",)).as_text()
        return text.count("__gpu$xla.gpu.triton")

    assert lower(64, 1, 28, (2, 4, 4096, 16, 128), 1) == 1      # 7B-shaped decode (G = 7)
    assert lower(64, 1, 12, (2, 2, 4096, 16, 128), 4) == 1      # 1.5B-shaped decode, split-K
    assert lower(4, 256, 12, (2, 2, 4096, 16, 128), 2) == 1     # chunked prefill, 48 row blocks
    assert lower(8, 1, 28, (28, 4, 65536, 16, 128), 2) == 1     # 3.8e9-element pool
    assert lower(64, 1, 12, (2, 2, 4096, 16, 128), 4, jnp.float8_e4m3fn) == 1  # float8 pool (kv_dtype)


def test_validation_and_impl_choice():
    q, k, v, pt, q_pos, kv_len = _problem(0, b=2, t=1, h=4, kv=2, s=4, d=8, mp=2, kv_len=[5, 3])
    on_gpu = jax.default_backend() == "gpu"
    assert resolve_impl("auto", 16, 128) == ("pallas" if on_gpu else "reference")
    assert resolve_impl("auto", 4, 8) == "reference"
    assert suggest_num_splits(64, 2, 512) == 5 and suggest_num_splits(256, 4, 512) == 1
    assert suggest_num_splits(1, 2, 16) == 1  # never below 16 pages per split
    auto = str(jax.make_jaxpr(lambda *a: paged_attention(*a))(q, k, v, 0, pt, q_pos, kv_len))
    assert ("pallas_call" in auto) == on_gpu  # "auto" dispatches to the reference on CPU
    assert "pallas_call" in str(jax.make_jaxpr(lambda *a: paged_attention(*a, impl="pallas"))(
        q, k, v, 0, pt, q_pos, kv_len))
    with pytest.raises(ValueError, match="impl"):
        paged_attention(q, k, v, 0, pt, q_pos, kv_len, impl="triton")
    with pytest.raises(ValueError, match="multiple of k_pages' kv heads"):
        paged_attention(q[:, :, :3], k, v, 0, pt, q_pos, kv_len)
    with pytest.raises(ValueError, match="v_pages"):
        paged_attention(q, k, v[:, :1], 0, pt, q_pos, kv_len)
    with pytest.raises(ValueError, match="page_table"):
        paged_attention(q, k, v, 0, pt[:1], q_pos, kv_len)
    with pytest.raises(ValueError, match="q_pos"):
        paged_attention(q, k, v, 0, pt, q_pos.astype(jnp.float32), kv_len)
    with pytest.raises(ValueError, match="num_splits"):
        paged_attention(q, k, v, 0, pt, q_pos, kv_len, impl="pallas", num_splits=0)
    with pytest.raises(ValueError, match="block_q"):
        paged_attention(q, k, v, 0, pt, q_pos, kv_len, impl="pallas", block_q=24)
    with pytest.raises(ValueError, match="powers of two >= 16"):
        paged_attention(q, k, v, 0, pt, q_pos, kv_len, impl="pallas", interpret=False)
