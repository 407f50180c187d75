"""memjax.kernels.token_logprob_entropy vs the dense reference (docs/architecture.md, principle 4).

The pallas kernels run in interpret mode on CPU; the chunked path is the CPU default. Shapes are
deliberately awkward: N, V not multiples of the blocks (V % bv != 0 exercises the overlapping last
tile and the dW stitch), V below one tile, row blocks that are entirely masked, all tokens masked.
Tolerances: fp32 forward <= 1e-5 and gradients <= 1e-4 (absolute); bf16 inputs vs the fp32 reference
on the same bf16 values: forward <= 1e-4, gradients <= 1e-2 relative to the largest gradient entry
(the kernels round dlogits to bf16 before the dh / dW matmuls, as bf16 training does).
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from memjax.kernels import token_logprob_entropy, token_logprob_entropy_ref
from memjax.kernels.fused_logprob import resolve_impl

SMALL = {"pallas": dict(block_rows=8, block_vocab=64, block_d=16), "chunked": dict(block_rows=8, block_vocab=64)}


def _problem(seed, lead, d, v, *, dtype=jnp.float32, masked_prefix=0, keep=0.6):
    rng = np.random.default_rng(seed)
    h = jnp.asarray(rng.standard_normal((*lead, d)), jnp.float32).astype(dtype)
    w = jnp.asarray(rng.standard_normal((d, v)) * 0.4, jnp.float32).astype(dtype)
    m = rng.uniform(size=lead) < keep
    m.reshape(-1)[:masked_prefix] = False
    t = np.where(m, rng.integers(0, v, lead), -100)  # masked targets may be anything (an out-of-range pad id)
    a, b = (jnp.asarray(rng.standard_normal(lead), jnp.float32) for _ in range(2))  # cotangents, masked too
    return h, w, jnp.asarray(t, jnp.int32), jnp.asarray(m), a, b


def _fwd_and_grads(fn, h, w, t, m, a, b, **kw):
    @jax.jit
    def run(h, w):
        outs, vjp = jax.vjp(lambda h, w: fn(h, w, t, m, **kw), h, w)
        return outs, vjp((a, b))
    return run(h, w)


def _maxdiff(x, y):
    return float(jnp.max(jnp.abs(jnp.asarray(x, jnp.float32) - jnp.asarray(y, jnp.float32))))


@pytest.mark.parametrize("impl,compact,lead,v,temp", [
    ("pallas", True, (37,), 203, 0.7),      # ragged V: overlapping last tile + dW stitch
    ("pallas", False, (37,), 192, 1.0),     # V a multiple of the tile; dead blocks left in place
    ("chunked", True, (37,), 203, 0.7),
    ("chunked", False, (3, 13), 203, 1.3),  # leading dims, no compaction
])
def test_fp32_forward_and_grads_match_reference(impl, compact, lead, v, temp):
    h, w, t, m, a, b = _problem(0, lead, 48, v, masked_prefix=20)
    kw = dict(temperature=temp)
    (lp, ent), (dh, dw) = _fwd_and_grads(token_logprob_entropy, h, w, t, m, a, b, impl=impl, compact=compact,
                                         **SMALL[impl], **kw)
    (lp_r, ent_r), (dh_r, dw_r) = _fwd_and_grads(token_logprob_entropy_ref, h, w, t, m, a, b, **kw)
    assert lp.shape == ent.shape == lead and lp.dtype == ent.dtype == jnp.float32
    assert _maxdiff(lp, lp_r) <= 1e-5 and _maxdiff(ent, ent_r) <= 1e-5
    assert _maxdiff(dh, dh_r) <= 1e-4 and _maxdiff(dw, dw_r) <= 1e-4
    masked = ~np.asarray(m)
    assert np.all(np.asarray(lp)[masked] == 0) and np.all(np.asarray(ent)[masked] == 0)
    assert np.all(np.asarray(dh)[masked] == 0)  # masked tokens get exactly zero gradient
    assert float(jnp.max(jnp.abs(dw_r))) > 0.1  # the comparison is not vacuous


@pytest.mark.parametrize("impl", ["pallas", "chunked"])
def test_all_tokens_masked(impl):
    h, w, t, m, a, b = _problem(1, (11,), 16, 40, keep=0.0)
    (lp, ent), (dh, dw) = _fwd_and_grads(token_logprob_entropy, h, w, t, m, a, b, impl=impl, **SMALL[impl])
    for x in (lp, ent, dh, dw):
        assert np.all(np.asarray(x) == 0)


@pytest.mark.parametrize("impl", ["pallas", "chunked"])
def test_bf16_within_stated_tolerance(impl):
    h, w, t, m, a, b = _problem(2, (29,), 32, 150, dtype=jnp.bfloat16, masked_prefix=9)
    (lp, ent), (dh, dw) = _fwd_and_grads(token_logprob_entropy, h, w, t, m, a, b, impl=impl, **SMALL[impl])
    assert dh.dtype == dw.dtype == jnp.bfloat16
    h32, w32 = h.astype(jnp.float32), w.astype(jnp.float32)
    (lp_r, ent_r), (dh_r, dw_r) = _fwd_and_grads(token_logprob_entropy_ref, h32, w32, t, m, a, b)
    assert _maxdiff(lp, lp_r) <= 1e-4 and _maxdiff(ent, ent_r) <= 1e-4
    assert _maxdiff(dh, dh_r) <= 1e-2 * float(jnp.max(jnp.abs(dh_r)))
    assert _maxdiff(dw, dw_r) <= 1e-2 * float(jnp.max(jnp.abs(dw_r)))


@pytest.mark.parametrize("impl", ["pallas", "chunked"])
def test_vocab_smaller_than_block_and_odd_d(impl):
    # V = 37 < block_vocab (pallas: tile 32 plus an overlapping tile; chunked: one tile of 37);
    # D = 24 -> pallas d-chunks of 8; N = 10 with row blocks of 4.
    h, w, t, m, _, _ = _problem(3, (10,), 24, 37)
    lp, ent = token_logprob_entropy(h, w, t, m, impl=impl, temperature=0.6, block_rows=4, block_vocab=64,
                                    block_d=64)
    lp_r, ent_r = token_logprob_entropy_ref(h, w, t, m, temperature=0.6)
    assert _maxdiff(lp, lp_r) <= 1e-5 and _maxdiff(ent, ent_r) <= 1e-5


def test_chunked_never_materialises_logits():
    n, d, v = 1024, 64, 32000
    specs = (jax.ShapeDtypeStruct((n, d), jnp.float32), jax.ShapeDtypeStruct((d, v), jnp.float32),
             jax.ShapeDtypeStruct((n,), jnp.int32), jax.ShapeDtypeStruct((n,), jnp.bool_))

    def temp_bytes(impl, **kw):
        def loss(h, w, t, m):
            lp, ent = token_logprob_entropy(h, w, t, m, impl=impl, **kw)
            return jnp.sum(lp) + jnp.sum(ent)
        fn = jax.jit(jax.grad(loss, argnums=(0, 1)))
        return fn.lower(*specs).compile().memory_analysis().temp_size_in_bytes

    dense, chunked = temp_bytes("reference"), temp_bytes("chunked", block_rows=256, block_vocab=2048)
    assert dense >= n * v * 4  # the reference really holds [N, V] logits
    assert chunked * 8 < dense, (chunked, dense)


def test_pallas_lowers_to_triton_ir_for_gpu():
    """Pallas -> Triton IR lowering for an abstract H100 (no GPU here: PTX compile and run are unchecked)."""
    from jax.sharding import AbstractDevice, AbstractMesh
    dev = AbstractDevice(device_kind="NVIDIA H100 80GB HBM3", num_cores=None, platform="gpu")

    def loss(h, w, t, m):
        lp, ent = token_logprob_entropy(h, w, t, m, impl="pallas", interpret=False)
        return jnp.sum(lp) + jnp.sum(ent)

    specs = (jax.ShapeDtypeStruct((300, 1536), jnp.bfloat16), jax.ShapeDtypeStruct((1536, 1000), jnp.bfloat16),
             jax.ShapeDtypeStruct((300,), jnp.int32), jax.ShapeDtypeStruct((300,), jnp.bool_))
    with jax.sharding.use_abstract_mesh(AbstractMesh((1,), ("x",), abstract_device=dev)):
        lowered = jax.jit(jax.grad(loss, argnums=(0, 1))).trace(*specs).lower(lowering_platforms=("cuda",))
    assert lowered.as_text().count("__gpu$xla.gpu.triton") == 3  # fwd, dh, dW kernels


def test_validation_and_impl_choice():
    h, w, t, m, _, _ = _problem(4, (5,), 8, 16)
    assert resolve_impl("auto") == "chunked"  # pallas only by request until a GPU measurement
    with pytest.raises(ValueError, match="impl"):
        token_logprob_entropy(h, w, t, m, impl="triton")
    with pytest.raises(ValueError, match="hidden"):
        token_logprob_entropy(h[:, :7], w, t, m)
    with pytest.raises(ValueError, match="mask"):
        token_logprob_entropy(h, w, t, m[:4])
    with pytest.raises(ValueError, match="targets must be integer"):
        token_logprob_entropy(h, w, t.astype(jnp.float32), m)
    with pytest.raises(ValueError, match="temperature"):
        token_logprob_entropy(h, w, t, m, temperature=0.0)


def test_chunked_default_row_blocks_let_a_short_call_skip_its_masked_rows():
    """The chunked path's default row block (chunked_block_rows): at least 8 blocks where n allows, 256..2048 rows; a
    micro-batch of two 1,024-token rows (n = 2,046) is 8 blocks of 256, so its ~30 response tokens (compacted first)
    cost one block of LM-head work instead of 2,046 rows; long calls keep 2,048-row blocks. And such a call, default
    blocks, equals the dense reference."""
    from memjax.kernels.fused_logprob import chunked_block_rows

    assert [chunked_block_rows(n) for n in (1, 200, 2046, 2048, 6144, 16384, 16385, 131072)] == \
        [256, 256, 256, 256, 512, 2048, 2048, 2048]
    h, w, t, m, a, b = _problem(3, (2, 1023), 16, 300, keep=0.015)
    assert 10 <= int(m.sum()) <= 60
    (lp, ent), (dh, dw) = _fwd_and_grads(token_logprob_entropy, h, w, t, m, a, b, impl="chunked", block_vocab=128)
    (lp_r, ent_r), (dh_r, dw_r) = _fwd_and_grads(token_logprob_entropy_ref, h, w, t, m, a, b)
    assert _maxdiff(lp, lp_r) <= 1e-5 and _maxdiff(ent, ent_r) <= 1e-5
    assert _maxdiff(dh, dh_r) <= 1e-4 and _maxdiff(dw, dw_r) <= 1e-4
