"""memjax.kernels.decode_merged (Pallas, interpret mode on CPU): decode attention whose split-K merge and slice back to
the G heads happen inside the kernel (EngineConfig.kernels.fuse_split_combine; issue 47).

- = `decode_from_rows` (the kernel plus XLA's merge) for 1, 2, 3 and 5 splits, G = 3 and 7 (not powers of two),
  fp32 / bf16 pools and a float8 pool, ragged context lengths with an idle sequence (kv_len 0) and a split longer
  than a sequence (empty splits drop out);
- the counters: the layer's row ends at n arrivals per (sequence, kv head), every other layer's row untouched, and
  n = 1 never touches them;
- one-line errors on bad shapes; the Pallas -> Triton lowering for an abstract H100 (1.5B and 7B layouts, bf16 and
  float8 pools, in a scan over layers with the counters carried). The memory order of the merge (a barrier, an
  acquire-release atomic, volatile loads) only a GPU exercises: tests/unit/kernels/test_kernels_gpu.py.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from memjax.kernels.decode_merged import decode_merged, merge_semaphores
from memjax.kernels.paged_attention import decode_from_rows

_FAST = {"xla_backend_optimization_level": 0, "xla_llvm_disable_expensive_passes": True}


def _problem(seed, *, b=5, h=6, kv=2, d=32, n_layers=3, p=48, s=4, mp=8, dtype=jnp.float32, pool_dtype=None):
    r = np.random.default_rng(seed)
    pool_dtype = pool_dtype or dtype
    kp = jnp.asarray(r.normal(size=(n_layers, kv, p, s, d)), jnp.float32).astype(pool_dtype)
    vp = jnp.asarray(r.normal(size=(n_layers, kv, p, s, d)), jnp.float32).astype(pool_dtype)
    pt = jnp.asarray(r.permutation(np.arange(1, p))[: b * mp].reshape(b, mp), jnp.int32)
    kvl = jnp.asarray(([0, 1, 13, s * mp, 7] * b)[:b], jnp.int32)     # idle, one key, ragged, full, ragged
    qpos = (jnp.maximum(kvl, 1) - 1)[:, None]
    g = h // kv
    q = jnp.asarray(r.normal(size=(b, kv, g, d)), jnp.float32).astype(jnp.float32 if pool_dtype == jnp.float8_e4m3fn
                                                                       else pool_dtype)
    q_rows = jnp.pad(q, ((0, 0), (0, 0), (0, 16 - g), (0, 0)))
    return q_rows, kp, vp, pt, qpos, kvl


def _both(args, h, n):
    q_rows, kp, vp, pt, qpos, kvl = args
    layer = jnp.int32(1)
    want = jax.jit(lambda *a: decode_from_rows(*a, num_heads=h, num_splits=n, interpret=True),
                   compiler_options=_FAST)(q_rows, kp, vp, layer, pt, qpos, kvl)
    got, sem = jax.jit(lambda *a: decode_merged(*a, num_heads=h, num_splits=n, interpret=True),
                       compiler_options=_FAST)(q_rows, kp, vp, layer, pt, qpos, kvl, merge_semaphores(kp, kvl.shape[0]))
    return np.asarray(got.astype(jnp.float32)), np.asarray(want.astype(jnp.float32)), np.asarray(sem)


@pytest.mark.parametrize("h,kv,n,dtype,pool,tol", [
    (6, 2, 1, jnp.float32, None, 0.0),                 # G = 3, one split: the rows written directly
    (6, 2, 3, jnp.float32, None, 2e-6),                # three splits of up to 3 pages (sequence 1: 2 empty splits)
    (7, 1, 5, jnp.float32, None, 2e-6),                # G = 7, five splits
    (6, 2, 2, jnp.bfloat16, None, 2 ** -8),            # bf16 pool and output
    (6, 2, 2, jnp.float32, jnp.float8_e4m3fn, 2e-6),   # a float8 pool: the page upcast in the loop
])
def test_matches_decode_from_rows(h, kv, n, dtype, pool, tol):
    args = _problem(3, h=h, kv=kv, dtype=dtype, pool_dtype=pool)
    got, want, sem = _both(args, h, n)
    assert got.shape == want.shape == (5, 1, h, 32)
    assert np.abs(got - want).max() <= tol * max(1.0, float(np.abs(want).max()))
    assert np.all(got[0] == 0) and np.abs(got[3]).max() > 0   # the idle sequence attends to nothing
    assert sem.shape == (3, 5, kv)
    assert np.all(sem[1] == (n if n > 1 else 0)) and not sem[0].any() and not sem[2].any()


def test_validation():
    q_rows, kp, vp, pt, qpos, kvl = _problem(0)
    sem = merge_semaphores(kp, 5)
    call = lambda **kw: decode_merged(**({"q_rows": q_rows, "k_pages": kp, "v_pages": vp, "layer": 0,  # noqa: E731
                                          "page_table": pt, "q_pos": qpos, "kv_len": kvl, "sem": sem,
                                          "num_heads": 6, "interpret": True} | kw))
    with pytest.raises(ValueError, match="q_rows .* must be"):
        call(q_rows=q_rows[:, :, :8])
    with pytest.raises(ValueError, match="q_rows .* must be"):
        call(num_heads=7)
    with pytest.raises(ValueError, match="sem must be int32"):
        call(sem=sem[:2])
    with pytest.raises(ValueError, match="sem must be int32"):
        call(sem=sem.astype(jnp.float32))
    with pytest.raises(ValueError, match="num_splits must be"):
        call(num_splits=0)


def test_triton_ir_orders_the_merge(capfd):
    """The order the merge's correctness rests on, in the Triton IR lowered for an H100 (Pallas' debug print): the
    partial stores, then a CTA barrier, then one scalar add on the counter with acquire-release order at GPU scope,
    then the branch of the last arrival, whose loads of the partials are volatile (3 per split: m, l, acc)."""
    from jax.sharding import AbstractDevice, AbstractMesh
    dev = AbstractDevice(device_kind="NVIDIA H100 80GB HBM3", num_cores=None, platform="gpu")
    sds = jax.ShapeDtypeStruct
    b, h, kv, n, pool = 8, 12, 2, 4, (2, 2, 256, 64, 128)
    f = lambda q, kp, vp, pt, qpos, kvl, sem: decode_merged(q, kp, vp, 1, pt, qpos, kvl, sem, num_heads=h,  # noqa: E731
                                                            num_splits=n, interpret=False, debug=True)
    specs = (sds((b, kv, 16, 128), jnp.bfloat16), sds(pool, jnp.bfloat16), sds(pool, jnp.bfloat16),
             sds((b, 64), jnp.int32), sds((b, 1), jnp.int32), sds((b,), jnp.int32), sds((2, b, kv), jnp.int32))
    capfd.readouterr()
    with jax.sharding.use_abstract_mesh(AbstractMesh((1,), ("x",), abstract_device=dev)):
        jax.jit(f).trace(*specs).lower(lowering_platforms=("cuda",))
    ir = capfd.readouterr().out.splitlines()
    at = lambda pred: [i for i, line in enumerate(ir) if pred(line)]  # noqa: E731
    stores, barrier = at(lambda x: x.lstrip().startswith("tt.store")), at(lambda x: "gpu.barrier" in x)
    atomics = at(lambda x: "tt.atomic_rmw" in x)
    branch, volatile = at(lambda x: x.lstrip().startswith("scf.if")), at(lambda x: "isVolatile = true" in x)
    assert len(barrier) == 1 and len(atomics) == 1 and "add, acq_rel, gpu" in ir[atomics[0]], ir[atomics[0]]
    assert "!tt.ptr<i32>, i32) -> i32" in ir[atomics[0]]            # one scalar counter per program
    assert sum(s < barrier[0] for s in stores) == 3                   # m, l, acc before the barrier
    assert barrier[0] < atomics[0] < min(i for i in branch if i > atomics[0]) < min(volatile)
    assert len(volatile) == 3 * n


def test_lowers_to_triton_for_an_h100():
    """Pallas -> Triton IR for an abstract H100 inside a scan over layers with the counters carried: the 1.5B
    (G = 6, KV = 2) and 7B (G = 7, KV = 4) layouts at D = 128, S = 64; 4 splits, 1 split, a float8 pool. The
    compiled round's kernel count: tests/e2e/benchmarks/test_gpu_aot.py."""
    from jax.sharding import AbstractDevice, AbstractMesh
    dev = AbstractDevice(device_kind="NVIDIA H100 80GB HBM3", num_cores=None, platform="gpu")
    sds = jax.ShapeDtypeStruct

    def lower(b, h, kv, n, pool_dtype):
        pool = (2, kv, 4096, 64, 128)

        def f(q, kp, vp, pt, qpos, kvl):
            def step(c, layer):
                acc, sem = c
                out, sem = decode_merged(q, kp, vp, layer, pt, qpos, kvl, sem, num_heads=h, num_splits=n,
                                         interpret=False)
                return (acc + out, sem), None
            init = (jnp.zeros((b, 1, h, 128), q.dtype), merge_semaphores(kp, b))
            return jax.lax.scan(step, init, jnp.arange(2, dtype=jnp.int32))[0]

        q_dt = jnp.bfloat16
        specs = (sds((b, kv, 16, 128), q_dt), sds(pool, pool_dtype), sds(pool, pool_dtype), sds((b, 64), jnp.int32),
                 sds((b, 1), jnp.int32), sds((b,), jnp.int32))
        with jax.sharding.use_abstract_mesh(AbstractMesh((1,), ("x",), abstract_device=dev)):
            text = jax.jit(f).trace(*specs).lower(lowering_platforms=("cuda",)).as_text()
        return text.count("__gpu$xla.gpu.triton")

    assert lower(32, 12, 2, 4, jnp.bfloat16) == 1
    assert lower(64, 28, 4, 1, jnp.bfloat16) == 1
    assert lower(64, 12, 2, 2, jnp.float8_e4m3fn) == 1
