"""memjax.kernels.ragged_paged_attention (packed rows of many sequences: the mixed round's attention) against the
per-row reference the mixed round runs on CPU (every row its own t = 1 sequence, `paged_attention_ref`).

Awkward on purpose: G = 3 (rows of a block not a power of two), runs longer than one block (several blocks per
sequence), a decode row (take 1), a sequence with take 0, padding rows owned by nobody (exact zeros), runs laid out
out of slot order, pages scattered over the pool, a float8 pool. Also: the block layout's page reads against the
per-row layout's (the reason for the kernel), its Triton lowering for an H100, and its one-line errors.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from memjax.kernels import paged_attention_ref, ragged_paged_attention
from memjax.kernels.ragged_paged_attention import ragged_blocks

_FAST = {"xla_backend_optimization_level": 0, "xla_llvm_disable_expensive_passes": True}


def _problem(dtype=jnp.float32, seed=0):
    """4 sequences (take 1, 11, 0, 6 at starts 9, 0, 5, 3) packed as slot 0, 3, 1 into 22 rows (4 padding rows)."""
    r = np.random.default_rng(seed)
    L, KV, G, S, D, B, MP, N = 2, 2, 3, 4, 8, 4, 6, 22
    P = 1 + B * MP + 2
    pt = r.permutation(np.arange(1, P))[: B * MP].reshape(B, MP).astype(np.int32)
    start, take = np.array([9, 0, 5, 3], np.int32), np.array([1, 11, 0, 6], np.int32)
    row_start, cur = np.zeros(B, np.int32), 0
    for s in (0, 3, 1):
        row_start[s], cur = cur, cur + take[s]
    k, v = (jnp.asarray(r.normal(size=(L, KV, P, S, D)), jnp.float32).astype(dtype) for _ in range(2))
    q = jnp.asarray(r.normal(size=(N, KV * G, D)), jnp.float32).astype(jnp.float32 if dtype == jnp.float32 else
                                                                       jnp.bfloat16)
    slot, pos, valid = np.zeros(N, np.int32), np.zeros(N, np.int32), np.zeros(N, bool)
    for s in range(B):
        for i in range(take[s]):
            slot[row_start[s] + i], pos[row_start[s] + i], valid[row_start[s] + i] = s, start[s] + i, True
    per_row = (jnp.asarray(np.where(valid[:, None], pt[slot], 0)), jnp.asarray(pos[:, None]),
               jnp.asarray(np.where(valid, pos + 1, 0)))
    ragged = tuple(map(jnp.asarray, (pt, row_start, take, start)))
    return q, k, v, ragged, per_row, valid


def _ref(q, k, v, per_row):
    return jax.jit(paged_attention_ref, compiler_options=_FAST)(q[:, None], k, v, jnp.int32(1), *per_row)[:, 0]


def _ragged(q, k, v, ragged, **kw):
    f = jax.jit(lambda *a: ragged_paged_attention(*a, **kw), compiler_options=_FAST)
    return f(q, k, v, jnp.int32(1), *ragged)


@pytest.mark.parametrize("impl,block_q", [("reference", 16), ("pallas", 16), ("pallas", 32)])
def test_matches_the_per_row_reference(impl, block_q):
    q, k, v, ragged, per_row, valid = _problem()
    out = _ragged(q, k, v, ragged, impl=impl, block_q=block_q, interpret=True)
    ref = _ref(q, k, v, per_row)
    assert out.shape == q.shape and out.dtype == q.dtype
    assert float(jnp.abs(out - ref).max()) <= 1e-5
    assert np.all(np.asarray(out)[~valid] == 0)  # padding rows: zeros, as the per-row reference gives


def test_float8_pool_within_bf16_tolerance():
    q, k, v, ragged, per_row, valid = _problem(jnp.float8_e4m3fn, seed=1)
    out = _ragged(q, k, v, ragged, impl="pallas", block_q=16, interpret=True)
    ref = _ref(q, k, v, per_row)
    assert out.dtype == jnp.bfloat16
    assert float(jnp.max(jnp.abs(out.astype(jnp.float32) - ref.astype(jnp.float32)))) <= 2e-2


def test_blocks_read_each_context_once_per_block():
    """A MemAgent-sized mixed round (7B: G = 7, block_q 64 -> 9 tokens a block, page 64): 64 decode tokens at 6K
    context and a 2,048-token prefill chunk at position 4,096. Pages read: the per-row layout reads the chunk's
    context once per token; the blocks once per 9 tokens (7x fewer reads in all)."""
    s, g, bt = 64, 7, 64 // 7
    take = jnp.asarray([1] * 64 + [2048], jnp.int32)
    start = jnp.asarray([6000] * 64 + [4096], jnp.int32)
    row_start = jnp.cumsum(take) - take
    n = int(take.sum())
    owner, rows, q_pos, kv_len = ragged_blocks(n, row_start, take, start, bt)
    used = np.asarray(kv_len) > 0
    assert used.sum() == 64 + -(-2048 // bt) and rows.shape[0] >= used.sum()
    qmax = np.asarray(q_pos).max(axis=1)
    blocks = np.minimum(-(-np.asarray(kv_len) // s), qmax // s + 1)[used].sum()
    pos = np.concatenate([np.full(64, 6000), 4096 + np.arange(2048)])
    per_row = (-(-(pos + 1) // s)).sum()
    assert per_row / blocks > 6.5, (per_row, blocks)  # 170,880 page reads -> 24,390 (the decode rows' 6,016 alike)
    got = sorted(np.asarray(rows)[np.asarray(rows) < n].tolist())
    assert got == list(range(n))  # every row in exactly one block


def test_lowers_to_triton_for_an_h100():
    from jax.sharding import AbstractDevice, AbstractMesh

    dev = AbstractDevice(device_kind="NVIDIA H100 80GB HBM3", num_cores=None, platform="gpu")
    sds = jax.ShapeDtypeStruct
    specs = (sds((8448, 28, 128), jnp.bfloat16), sds((2, 4, 4096, 64, 128), jnp.bfloat16),
             sds((2, 4, 4096, 64, 128), jnp.bfloat16), sds((), jnp.int32), sds((256, 128), jnp.int32),
             sds((256,), jnp.int32), sds((256,), jnp.int32), sds((256,), jnp.int32))
    f = lambda *a: ragged_paged_attention(*a, impl="pallas", interpret=False)  # noqa: E731
    with jax.sharding.use_abstract_mesh(AbstractMesh((1,), ("x",), abstract_device=dev)):
        text = jax.jit(f).trace(*specs).lower(lowering_platforms=("cuda",)).as_text()
    assert text.count("__gpu$xla.gpu.triton") == 1


def test_one_line_errors():
    q, k, v, ragged, _, _ = _problem()
    pt, row_start, take, start = ragged
    with pytest.raises(ValueError, match=r"q must be \[N, H, D\]"):
        ragged_paged_attention(q[None], k, v, 0, *ragged)
    with pytest.raises(ValueError, match="must be \\[B=4\\]"):
        ragged_paged_attention(q, k, v, 0, pt, row_start[:3], take, start)
    with pytest.raises(ValueError, match="block_q"):
        ragged_paged_attention(q, k, v, 0, *ragged, block_q=24)
    with pytest.raises(ValueError, match="impl"):
        ragged_paged_attention(q, k, v, 0, *ragged, impl="triton")
    with pytest.raises(ValueError, match="powers of two"):
        ragged_paged_attention(q, k, v, 0, *ragged, impl="pallas", interpret=False)
