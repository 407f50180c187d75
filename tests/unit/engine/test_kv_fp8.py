"""The float8 KV pool (EngineConfig.kv.kv_dtype="float8_e4m3fn", issue 47 item 4).

- storing: out-of-range values saturate at +-448 instead of becoming NaN; a value is stored / scale;
- the scales are applied: K and V of magnitude ~2,000 saturate with scales 1 (large error) and round-trip with
  scales 32 (the error of e4m3 rounding only), through PagedAttention's write and read;
- a pool page costs 1 byte per value (a quarter of the fp32 pool, half of bf16), so a budget holds 4x / 2x the pages;
- validation: unknown dtypes, scales without a float8 pool, the Mosaic kernel with one, and memjax.train without the
  old log-prob recompute are refused with one line;
- the fused decode prologue (EngineConfig.kernels.fuse_rope_kv) applies the same scales: `PagedAttention.prologue_attend`
  on raw projections equals bias + RoPE + the plain call, through the reference and through the Pallas kernel's
  row layout, on a float8 pool with scales and on an fp32 pool;
An engine with a float8 pool against the trainer (the log-prob gap): tests/e2e/benchmarks/test_kv_fp8_gap.py.
"""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from memjax.engine.config import FP8_E4M3_MAX, EngineConfig, KVCacheOptions, KernelOptions
from memjax.engine.paged_kv import PagedAttention, to_pool
from memjax.engine.state import kv_bytes_per_page
from memjax.model import presets

F8 = jnp.float8_e4m3fn


def test_to_pool_saturates_and_scales():
    x = jnp.asarray([1000.0, -1e6, 0.1, 3.0, 0.0], jnp.float32)
    y = np.asarray(to_pool(x, F8).astype(jnp.float32))
    assert np.all(np.isfinite(y)) and y[0] == FP8_E4M3_MAX and y[1] == -FP8_E4M3_MAX
    assert np.asarray(x.astype(F8).astype(jnp.float32))[0] != FP8_E4M3_MAX  # the plain cast: NaN, not 448
    np.testing.assert_allclose(y[2:], [0.1, 3.0, 0.0], rtol=2 ** -4)
    z = np.asarray(to_pool(x[:4] * 4, F8, 16.0).astype(jnp.float32)) * 16  # 4000 / 16 fits in +-448
    np.testing.assert_allclose(z[[0, 2, 3]], [4000.0, 0.4, 12.0], rtol=2 ** -4)
    assert to_pool(x, jnp.bfloat16).dtype == jnp.bfloat16  # other pools: a plain cast


def _attend(dtype, scale, k, v, q):
    """Write k, v [b, t, KV, D] at positions 0.. through PagedAttention into a pool of `dtype`, attend with q."""
    b, t, kvh, d = k.shape
    s, mp = 4, -(-t // 4)
    pt = jnp.arange(1, b * mp + 1, dtype=jnp.int32).reshape(b, mp)
    pool = jnp.zeros((1, kvh, b * mp + 1, s, d), dtype)
    att = PagedAttention(pt, jnp.zeros(b, jnp.int32), jnp.full(b, t, jnp.int32), k_scale=scale, v_scale=scale)
    out, (kp, _) = jax.jit(lambda q, k, v: att(q, k, v, layer=jnp.int32(0), state=(pool, pool)))(q, k, v)
    return np.asarray(out, np.float32), kp


def test_paged_attention_applies_the_scales():
    r = np.random.default_rng(0)
    b, t, kvh, g, d = 2, 7, 2, 2, 8
    k = jnp.asarray(r.normal(size=(b, t, kvh, d)) * 2000, jnp.float32)
    v = jnp.asarray(r.normal(size=(b, t, kvh, d)) * 2000, jnp.float32)
    q = jnp.asarray(r.normal(size=(b, t, kvh * g, d)) * 1e-3, jnp.float32)
    ref, _ = _attend(jnp.float32, 1.0, k, v, q)
    scaled, kp = _attend(F8, 32.0, k, v, q)  # |x| up to ~4 sigma = 8,000 / 32 < 448
    saturated, _ = _attend(F8, 1.0, k, v, q)
    assert kp.dtype == F8
    err = lambda x: float(np.abs(x - ref).max() / np.abs(ref).max())  # noqa: E731
    assert err(scaled) < 0.08  # e4m3 rounding (3 mantissa bits) of K and V
    assert err(saturated) > 2 * err(scaled)  # |x| > 448 clipped: the scale is what made it fit


def test_float8_pool_costs_one_byte_per_value():
    mcfg = presets.get("tiny")  # fp32 compute
    e = EngineConfig(window=64, page_size=16)
    f8 = dataclasses.replace(e, kv=KVCacheOptions(kv_dtype="float8_e4m3fn"))
    assert kv_bytes_per_page(mcfg, e) == 4 * kv_bytes_per_page(mcfg, f8)
    assert kv_bytes_per_page(mcfg, f8) == 2 * mcfg.num_layers * mcfg.num_kv_heads * 16 * mcfg.head_dim
    bf = presets.get("tiny", dtype="bfloat16")
    assert kv_bytes_per_page(bf, e) == 2 * kv_bytes_per_page(bf, f8)


def test_validation():
    with pytest.raises(ValueError, match="kv_dtype must be one of"):
        EngineConfig(kv=KVCacheOptions(kv_dtype="float8_e5m2"))
    with pytest.raises(ValueError, match="scale a float8 pool only"):
        EngineConfig(kv=KVCacheOptions(k_scale=2.0))
    with pytest.raises(ValueError, match="k_scale must be a positive finite"):
        EngineConfig(kv=KVCacheOptions(kv_dtype="float8_e4m3fn", k_scale=0.0))
    with pytest.raises(ValueError, match="Mosaic"):
        EngineConfig(kv=KVCacheOptions(kv_dtype="float8_e4m3fn"), kernels=KernelOptions(attention="mosaic"))
    from memjax.kernels.paged_attention import paged_attention

    pool = jnp.zeros((1, 1, 3, 16, 16), F8)
    with pytest.raises(ValueError, match="float8 pool"):
        paged_attention(jnp.zeros((1, 1, 2, 16), jnp.bfloat16), pool, pool, 0, jnp.ones((1, 1), jnp.int32),
                        jnp.zeros((1, 1), jnp.int32), jnp.ones(1, jnp.int32), impl="mosaic", interpret=True)
    from memjax.rl.trainer import UpdateConfig
    from memjax.run.train_config import TrainConfig

    eng = EngineConfig(window=1024, kv=KVCacheOptions(kv_dtype="float8_e4m3fn"))
    TrainConfig(engine=eng)  # recompute on (the default): accepted
    with pytest.raises(ValueError, match="recompute_old_logp"):
        TrainConfig(engine=eng, update=UpdateConfig(recompute_old_logp=False))


@pytest.mark.parametrize("pool_dtype,scale", [(F8, 8.0), (jnp.float32, 1.0)])
@pytest.mark.parametrize("pallas", [False, True], ids=["reference", "pallas-rows"])
def test_fused_prologue_applies_the_scales(pool_dtype, scale, pallas):
    from memjax.kernels import engine_attend
    from memjax.model.layers import apply_rope, rope_cos_sin

    r = np.random.default_rng(1)
    b, h, kvh, d, s = 3, 6, 2, 16, 4
    n = (h + 2 * kvh) * d
    y = jnp.asarray(r.normal(size=(b, n)) * 40, jnp.float32)
    bias = jnp.asarray(r.normal(size=(n,)), jnp.float32)
    start = jnp.asarray([5, 0, 9], jnp.int32)
    cos, sin = rope_cos_sin(start[:, None], d, 1e4, jnp.float32)
    pt = jnp.arange(1, b * 3 + 1, dtype=jnp.int32).reshape(b, 3)
    pool = jnp.asarray(r.normal(size=(1, kvh, b * 3 + 1, s, d)) * 40, jnp.float32).astype(pool_dtype)
    kw = dict(k_scale=scale, v_scale=scale) | ({"attend": engine_attend(impl="pallas", interpret=True)} if pallas else {})
    att = PagedAttention(pt, start, jnp.ones(b, jnp.int32), fuse_rope_kv=True, **kw)
    assert att.fused_prologue
    cols = (0, h * d, (h + kvh) * d)
    got, (kp, vp) = jax.jit(lambda: att.prologue_attend((y, y, y), cols, (bias,) * 3, cos[:, 0], sin[:, 0],
                                                        num_heads=h, layer=jnp.int32(0), state=(pool, pool)))()
    x = y + bias
    q = apply_rope(x[:, : h * d].reshape(b, 1, h, d), cos, sin)
    k = apply_rope(x[:, cols[1]: cols[2]].reshape(b, 1, kvh, d), cos, sin)
    v = x[:, cols[2]:].reshape(b, 1, kvh, d)
    plain = PagedAttention(pt, start, jnp.ones(b, jnp.int32), **kw)
    want, (kw_, vw_) = jax.jit(lambda: plain(q, k, v, layer=jnp.int32(0), state=(pool, pool)))()
    for a, e in ((kp, kw_), (vp, vw_)):  # (fp32: the two programs' roundings may differ by an ulp)
        np.testing.assert_allclose(np.asarray(a.astype(jnp.float32)), np.asarray(e.astype(jnp.float32)), rtol=1e-6,
                                   atol=1e-5)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), atol=1e-4 * float(np.abs(want).max()), rtol=0)
