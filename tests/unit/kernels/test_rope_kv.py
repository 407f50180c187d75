"""memjax.kernels.rope_kv (Pallas, interpret mode on CPU) against its pure-JAX specification and against what the
decoder and the engine do without it (EngineConfig.kernels.fuse_rope_kv; issue 47).

- kernel = `rope_kv_ref` for one fused [b, q + 2kv] source (cols 0, q, q + kv) and for three separate ones, with and
  without bias, G = 3 and 7 (not powers of two, padded to 16 rows), fp32 / bf16 pools and a float8 pool with scales;
  rows whose page is out of range (the engine's dropped rows) write nothing and every other page is untouched (the
  pools are aliased in place);
- `rope_kv_ref` = the decoder's own bias + `apply_rope`, the engine's `write_kv` and `paged_attention`'s row
  layout, so the kernel stands for the path it replaces;
- one-line errors on bad shapes; the Pallas -> Triton lowering for an abstract H100 (1.5B and 7B head layouts,
  bf16 and float8 pools). The compiled round's structure: tests/e2e/benchmarks/test_gpu_aot.py.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from memjax.engine.paged_kv import to_pool, write_kv
from memjax.kernels.rope_kv import rope_kv, rope_kv_ref
from memjax.model.layers import apply_rope, rope_cos_sin

_FAST = {"xla_backend_optimization_level": 0, "xla_llvm_disable_expensive_passes": True}


def _problem(seed, *, b=5, h=6, kv=2, d=32, n_layers=2, p=9, s=4, dtype=jnp.float32, pool_dtype=None, fused=True,
             bias=True):
    r = np.random.default_rng(seed)
    n = (h + 2 * kv) * d
    mk = lambda *shape: jnp.asarray(r.normal(size=shape), jnp.float32).astype(dtype)  # noqa: E731
    if fused:
        y = mk(b, n)
        srcs, cols = (y, y, y), (0, h * d, h * d + kv * d)
        bias_t = (mk(n),) * 3 if bias else None
    else:
        srcs, cols = (mk(b, h * d), mk(b, kv * d), mk(b, kv * d)), (0, 0, 0)
        bias_t = (mk(h * d), mk(kv * d), mk(kv * d)) if bias else None
    cos, sin = rope_cos_sin(jnp.asarray(r.integers(0, 500, size=(b, 1)), jnp.int32), d, 1e4, dtype)
    pool_dtype = pool_dtype or dtype
    kp = jnp.asarray(r.normal(size=(n_layers, kv, p, s, d)), jnp.float32).astype(pool_dtype)
    vp = jnp.asarray(r.normal(size=(n_layers, kv, p, s, d)), jnp.float32).astype(pool_dtype)
    page = jnp.asarray(r.permutation(np.arange(1, p))[:b], jnp.int32).at[2].set(p + 2)  # row 2: dropped
    off = jnp.asarray(r.integers(0, s, size=b), jnp.int32)
    return srcs, cols, bias_t, cos[:, 0], sin[:, 0], kp, vp, page, off


def _run(args, h, rows, scale, impl):
    srcs, cols, bias, cos, sin, kp, vp, page, off = args
    f = jax.jit(lambda srcs, bias, cos, sin, kp, vp, layer, page, off: rope_kv(
        *srcs, cols, bias, cos, sin, kp, vp, layer, page, off, num_heads=h, rows=rows, k_scale=scale, v_scale=scale,
        impl=impl, interpret=True), compiler_options=_FAST)
    return [np.asarray(x.astype(jnp.float32)) for x in f(srcs, bias, cos, sin, kp, vp, jnp.int32(1), page, off)]


@pytest.mark.parametrize("h,kv,dtype,pool,fused,bias,scale,tol", [
    (6, 2, jnp.float32, None, True, True, 1.0, 2e-6),            # G = 3, one fused source
    (7, 1, jnp.float32, None, False, True, 1.0, 2e-6),           # G = 7, three sources
    (6, 2, jnp.bfloat16, None, True, False, 1.0, 0.0),           # bf16, no bias
    (6, 2, jnp.float32, jnp.float8_e4m3fn, True, True, 4.0, 2e-6),  # float8 pool with scales
])
def test_kernel_matches_reference(h, kv, dtype, pool, fused, bias, scale, tol):
    args = _problem(0, h=h, kv=kv, dtype=dtype, pool_dtype=pool, fused=fused, bias=bias)
    got = _run(args, h, 16, scale, "pallas")
    ref = _run(args, h, 16, scale, "reference")
    for a, e in zip(got, ref):
        assert a.shape == e.shape and np.abs(a - e).max() <= tol
    kp0 = np.asarray(args[5].astype(jnp.float32))
    changed = np.argwhere(np.any(got[1] != kp0, axis=-1))  # [layer, kv head, page, off] of every changed row
    written = {(1, j, int(p_), int(o)) for p_, o in zip(args[7], args[8]) for j in range(kv) if p_ < kp0.shape[2]}
    assert {tuple(map(int, c)) for c in changed} <= written and len(written) == 4 * kv  # dropped row: nothing
    assert np.all(got[0][:, :, h // kv:] == 0)  # the padding rows


def test_reference_is_the_decoder_and_engine_path():
    """bias + apply_rope (memjax/model), write_kv (memjax/engine) and paged_attention's [b, KV, rows, D] layout."""
    h, kv, d = 6, 2, 32
    srcs, cols, bias, cos, sin, kp, vp, page, off = _problem(1, h=h, kv=kv, d=d, fused=False)
    scale = 2.0
    q_rows, k_new, v_new = rope_kv_ref(*srcs, cols, bias, cos, sin, kp, vp, 1, page, off, num_heads=h, rows=16,
                                       k_scale=scale, v_scale=scale)
    b = srcs[0].shape[0]
    q, k, v = (x + bb for x, bb in zip(srcs, bias))
    q = apply_rope(q.reshape(b, 1, h, d), cos[:, None], sin[:, None])
    k = apply_rope(k.reshape(b, 1, kv, d), cos[:, None], sin[:, None])
    n_valid = jnp.where(page < kp.shape[2], 1, 0)
    # write_kv finds (page, off) from a page table: one entry per row, position = off
    pt = jnp.where(page < kp.shape[2], page, 0)[:, None]
    np.testing.assert_array_equal(write_kv(kp, 1, k, pt, off, n_valid, scale), k_new)
    np.testing.assert_array_equal(write_kv(vp, 1, v.reshape(b, 1, kv, d), pt, off, n_valid, scale), v_new)
    want = (q.astype(jnp.float32) * scale).astype(q.dtype).reshape(b, kv, h // kv, d)
    np.testing.assert_array_equal(q_rows[:, :, : h // kv], want)
    assert to_pool(k, jnp.float32, scale).dtype == jnp.float32  # the fp32 pool stores k as is (scales: float8 only)


def test_validation():
    srcs, cols, bias, cos, sin, kp, vp, page, off = _problem(0)
    call = lambda **kw: rope_kv(*kw.get("srcs", srcs), kw.get("cols", cols), kw.get("bias", bias),  # noqa: E731
                                kw.get("cos", cos), sin, kp, kw.get("vp", vp), 0, kw.get("page", page), off,
                                num_heads=kw.get("h", 6), rows=kw.get("rows", 16), impl=kw.get("impl", "pallas"))
    with pytest.raises(ValueError, match="multiple of the pool's kv heads"):
        call(h=5)
    with pytest.raises(ValueError, match="k_pages and v_pages"):
        call(vp=vp[:, :1])
    with pytest.raises(ValueError, match="k_src must be"):
        call(cols=(0, 9999, 0))
    with pytest.raises(ValueError, match="cos and sin"):
        call(cos=cos[:, :4])
    with pytest.raises(ValueError, match="rows must be"):
        call(rows=2)
    with pytest.raises(ValueError, match="bias must be"):
        call(bias=bias[:2])
    with pytest.raises(ValueError, match="page and off"):
        call(page=page[:2])
    with pytest.raises(ValueError, match="impl must be"):
        call(impl="triton")


def test_lowers_to_triton_for_an_h100():
    """Pallas -> Triton IR for an abstract H100 inside a scan over layers: the 1.5B (G = 6, KV = 2) and 7B (G = 7,
    KV = 4) layouts at D = 128, S = 64, bf16 and float8 pools. PTX: tests/e2e/benchmarks/test_gpu_aot.py."""
    from jax.sharding import AbstractDevice, AbstractMesh
    dev = AbstractDevice(device_kind="NVIDIA H100 80GB HBM3", num_cores=None, platform="gpu")
    sds = jax.ShapeDtypeStruct

    def lower(b, h, kv, pool_dtype):
        n, d, pool = (h + 2 * kv) * 128, 128, (2, kv, 4096, 64, 128)

        def f(y, bias, cos, sin, kp, vp, page, off):
            def step(c, layer):
                q, kp, vp = c
                q_rows, kp, vp = rope_kv(y, y, y, (0, h * d, (h + kv) * d), (bias,) * 3, cos, sin, kp, vp, layer,
                                         page, off, num_heads=h, rows=16, k_scale=2.0, v_scale=2.0, interpret=False)
                return (q + q_rows.astype(q.dtype), kp, vp), None
            init = (jnp.zeros((b, kv, 16, d), jnp.bfloat16), kp, vp)
            return jax.lax.scan(step, init, jnp.arange(2, dtype=jnp.int32))[0]

        specs = (sds((b, n), jnp.bfloat16), sds((n,), jnp.bfloat16), sds((b, d), jnp.bfloat16),
                 sds((b, d), jnp.bfloat16), sds(pool, pool_dtype), sds(pool, pool_dtype), sds((b,), jnp.int32),
                 sds((b,), jnp.int32))
        with jax.sharding.use_abstract_mesh(AbstractMesh((1,), ("x",), abstract_device=dev)):
            text = jax.jit(f).trace(*specs).lower(lowering_platforms=("cuda",)).as_text()
        return text.count("__gpu$xla.gpu.triton")

    assert lower(32, 12, 2, jnp.bfloat16) == 1
    assert lower(64, 28, 4, jnp.bfloat16) == 1
    assert lower(64, 12, 2, jnp.float8_e4m3fn) == 1
