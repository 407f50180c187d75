"""GPU tier (`make test-gpu`): the compiled Pallas kernels (interpret=False, Triton lowering) vs their pure-JAX
references at GPU-sized shapes, forward and gradients, fp32 and bf16.

The CPU suite checks the same kernels in interpret mode at small, awkward shapes (test_paged_attention_kernel.py,
test_fused_logprob.py, test_step_ratio_loss.py) and only lowers the GPU path to Triton IR; this module compiles and
runs them. Every test is marked `gpu`: skipped with the reason off GPU (tests/conftest.py); with
MEMJAX_GPU_TIER_ANYWHERE=1 it runs on CPU in interpret mode at reduced shapes, to check the tier's own code.
Tolerances: as the CPU tests state for fp32 (the references run at matmul precision "highest"; the kernels'
fp32 dots may use TF32 on Hopper, hence 2e-3 rather than 1e-5), and the same bf16 bounds as the CPU tests.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from conftest import on_gpu
from memjax.kernels import paged_attention, paged_attention_ref, token_logprob_entropy, token_logprob_entropy_ref
from memjax.kernels.reference import step_ratio_loss_ref
from memjax.kernels.step_ratio_loss import step_ratio_loss
from test_fused_logprob import _fwd_and_grads, _maxdiff
from test_fused_logprob import _problem as _logprob_problem
from test_paged_attention_kernel import _problem as _paged_problem

pytestmark = pytest.mark.gpu

GPU = on_gpu()
INTERPRET = not GPU
FP32_TOL = 2e-3


def _scale(gpu_value: int, cpu_value: int) -> int:
    return gpu_value if GPU else cpu_value


@pytest.mark.parametrize("dtype,tol", [(jnp.float32, FP32_TOL), (jnp.bfloat16, 2e-2)])
@pytest.mark.parametrize("t,splits", [(1, 1), (1, 4), (16, 1), (64, 2)])
def test_compiled_paged_attention_matches_reference(dtype, tol, t, splits):
    """Decode (t=1, split-K 1 and 4) and chunked prefill (t=16/64) on 7B-like heads (28 query / 4 KV, D=128,
    pages of 16), ragged context lengths up to ~2K tokens, one empty row, scattered pages."""
    b, mp = _scale(16, 3), _scale(128, 8)
    h, kv, d = (28, 4, 128) if GPU else (4, 2, 16)
    rng = np.random.default_rng(t * 10 + splits)
    kv_len = rng.integers(t, mp * 16, b)
    kv_len[0] = 0  # padding row: exact zeros
    q, k, v, pt, q_pos, kvl = _paged_problem(t, b=b, t=t, h=h, kv=kv, s=16, d=d, mp=mp, kv_len=kv_len,
                                             dtype=dtype, q_back=np.minimum(kv_len, t))
    run = jax.jit(lambda *a: paged_attention(*a, impl="pallas", num_splits=splits, interpret=INTERPRET))
    got = run(q, k, v, 1, pt, q_pos, kvl)
    want = jax.jit(paged_attention_ref)(q, k, v, 1, pt, q_pos, kvl)
    assert got.dtype == want.dtype
    assert _maxdiff(got, want) <= tol
    assert float(jnp.abs(got[0]).max()) == 0.0


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16])
def test_compiled_fused_logprob_matches_reference(dtype):
    """Forward and VJP at a real vocabulary (151,936, ragged against every tile) and hidden 1536 (1.5B)."""
    n, d, v = (_scale(2048, 37), _scale(1536, 32), _scale(151_936, 203))
    h, w, t, m, a, b = _logprob_problem(5, (n,), d, v, dtype=dtype, masked_prefix=n // 8)
    w = (w / np.sqrt(d / 32)).astype(dtype)  # keep logits O(1) at a wide hidden size
    (lp, ent), (dh, dw) = _fwd_and_grads(token_logprob_entropy, h, w, t, m, a, b, impl="pallas",
                                         interpret=INTERPRET)
    h32, w32 = h.astype(jnp.float32), w.astype(jnp.float32)
    (lp_r, ent_r), (dh_r, dw_r) = _fwd_and_grads(token_logprob_entropy_ref, h32, w32, t, m, a, b)
    fwd_tol = FP32_TOL if dtype == jnp.float32 else 1e-4 * max(1.0, float(jnp.abs(lp_r).max()))
    assert _maxdiff(lp, lp_r) <= max(fwd_tol, 1e-4) and _maxdiff(ent, ent_r) <= max(fwd_tol, 1e-4)
    for got, want in ((dh, dh_r), (dw, dw_r)):
        assert _maxdiff(got, want) <= 1e-2 * float(jnp.max(jnp.abs(want)))
    assert float(jnp.max(jnp.abs(dw_r))) > 0.0  # the comparison is not vacuous


def test_compiled_step_ratio_loss_matches_reference():
    """Memory-R2's step loss on [8, 8192] tokens in 219 steps (the H100 benchmark's shape): value and gradient."""
    rows, tokens, steps = _scale(8, 2), _scale(8192, 96), _scale(219, 11)
    rng = np.random.default_rng(3)
    seg = np.sort(rng.integers(-1, steps, (rows, tokens)), axis=1).astype(np.int32)
    mask = rng.uniform(size=(rows, tokens)) < 0.8
    logp = rng.normal(-1, 0.4, (rows, tokens)).astype(np.float32)
    old = (logp + rng.normal(0, 0.3, logp.shape)).astype(np.float32)
    adv = rng.normal(0, 1, logp.shape).astype(np.float32)
    kw = dict(num_segments=steps, clip_low=0.2, clip_high=0.28, dual_clip=3.0)

    run = jax.jit(jax.value_and_grad(
        lambda x: step_ratio_loss(x, old, adv, mask, seg, **kw, impl="pallas", interpret=INTERPRET), has_aux=True))
    (loss, metrics), grad = run(jnp.asarray(logp))
    loss_r, grad_r = jax.jit(jax.value_and_grad(
        lambda x: step_ratio_loss_ref(x, old, adv, mask, seg, **kw)))(jnp.asarray(logp))
    assert abs(float(loss) - float(loss_r)) <= 1e-5
    used = np.unique(seg[mask & (seg >= 0)])
    assert float(metrics["num_steps"]) == len(used) > 0
    assert _maxdiff(grad, grad_r) <= 1e-4 and float(jnp.abs(grad_r).max()) > 0


@pytest.mark.parametrize("dtype,pool,tol", [(jnp.bfloat16, None, 2 ** -7), (jnp.bfloat16, jnp.float8_e4m3fn, 2 ** -4),
                                            (jnp.float32, None, 1e-5)])
def test_compiled_rope_kv_matches_reference(dtype, pool, tol):
    """The fused decode prologue (memjax/kernels/rope_kv.py) compiled: the 1.5B head layout (12 query / 2 KV heads,
    D = 128, G = 6 padded to 16 rows) at batch 64 over a [2, 2, 1024, 64, 128] pool, one fused q/k/v source with
    bias, a dropped row; float8 with scales. Tolerance relative to the largest value: an ulp or two of the stored
    dtype (XLA may keep bf16 intermediates in fp32 where the kernel rounds each operation), 1e-5 in fp32."""
    from test_rope_kv import _problem as _rope_problem

    from memjax.kernels.rope_kv import rope_kv

    b, h, kv, d, p, s = (64, 12, 2, 128, 1024, 64) if GPU else (5, 6, 2, 32, 9, 4)
    srcs, cols, bias, cos, sin, kp, vp, page, off = _rope_problem(7, b=b, h=h, kv=kv, d=d, p=p, s=s, dtype=dtype,
                                                                  pool_dtype=pool)
    scale = 4.0 if pool is not None else 1.0
    outs = {}
    for impl in ("pallas", "reference"):
        f = jax.jit(lambda srcs, bias, kp, vp, impl=impl: rope_kv(
            *srcs, cols, bias, cos, sin, kp, vp, 1, page, off, num_heads=h, rows=16, k_scale=scale, v_scale=scale,
            impl=impl, interpret=INTERPRET))
        outs[impl] = [np.asarray(x.astype(jnp.float32)) for x in f(srcs, bias, kp, vp)]
    for got, want in zip(outs["pallas"], outs["reference"]):
        assert np.abs(got - want).max() <= tol * max(1.0, float(np.abs(want).max()))
    assert np.any(outs["pallas"][1] != np.asarray(kp.astype(jnp.float32)))  # something was written


@pytest.mark.parametrize("dtype,tol", [(jnp.float32, FP32_TOL), (jnp.bfloat16, 2e-2)])
@pytest.mark.parametrize("splits", [1, 4, 16])
def test_compiled_decode_merged_matches_decode_from_rows(dtype, tol, splits):
    """The split-K merge inside the decode kernel (memjax/kernels/decode_merged.py) compiled: its last-arriver merge
    (a barrier, an acquire-release atomic per sequence and kv head, volatile loads of the other programs' partials)
    is only exercised here, where programs really run concurrently. The 1.5B layout (12 query / 2 KV heads, D = 128,
    pages of 64) at batch 128, contexts up to 8K tokens; the same call five times (a race would show as a wrong or
    unstable result), against `decode_from_rows` (the kernel plus XLA's merge)."""
    from memjax.kernels.decode_merged import decode_merged, merge_semaphores
    from memjax.kernels.paged_attention import decode_from_rows

    b, h, kv, d, s, mp, p = (128, 12, 2, 128, 64, 128, 4096) if GPU else (5, 6, 2, 32, 4, 8, 24)
    keys = jax.random.split(jax.random.key(11), 5)
    kp = jax.random.normal(keys[0], (3, kv, p, s, d), dtype)          # pages may repeat across sequences: reads only
    vp = jax.random.normal(keys[1], (3, kv, p, s, d), dtype)
    pt = jax.random.randint(keys[2], (b, mp), 1, p, jnp.int32)
    kvl = jax.random.randint(keys[3], (b,), 0, s * mp + 1, jnp.int32).at[0].set(0)
    qpos = (jnp.maximum(kvl, 1) - 1)[:, None]
    g = h // kv
    q_rows = jnp.pad(jax.random.normal(keys[4], (b, kv, g, d), dtype), ((0, 0), (0, 0), (0, 16 - g), (0, 0)))
    want = np.asarray(jax.jit(lambda layer: decode_from_rows(q_rows, kp, vp, layer, pt, qpos, kvl, num_heads=h,
                                                             num_splits=splits, interpret=INTERPRET))(2)
                      .astype(jnp.float32))

    @jax.jit
    def five(sem):
        outs = []
        for _ in range(5):  # layer 2 each time, its counters set back to zero between calls
            out, sem = decode_merged(q_rows, kp, vp, 2, pt, qpos, kvl, sem, num_heads=h, num_splits=splits,
                                     interpret=INTERPRET)
            outs.append(out)
            sem = sem.at[2].set(0)
        return jnp.stack(outs), sem

    got, sem = five(merge_semaphores(kp, b))
    got = np.asarray(got.astype(jnp.float32))
    for g in got:
        assert np.abs(g - want).max() <= tol * max(1.0, float(np.abs(want).max()))
    assert np.all(got == got[0]), "the merged result changed between identical calls"
    assert not np.asarray(sem).any()
