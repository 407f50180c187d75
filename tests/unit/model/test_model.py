"""Decoder tests that need no fixtures: presets, parameter counts, config validation, attention and
forward invariants (causality, explicit positions, segments, GQA vs a numpy repeated-KV reference)."""

import jax
import jax.extend
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

import memjax
from memjax.model import DenseCausal, count_params, init_model, presets
from memjax.model.qwen2 import param_shapes

jax.config.update("jax_default_matmul_precision", "highest")


@pytest.mark.parametrize("name", list(presets.PUBLISHED_PARAM_COUNTS))
def test_count_params_equals_published(name):
    cfg = presets.get(name)
    assert count_params(cfg) == presets.PUBLISHED_PARAM_COUNTS[name]
    assert memjax.model.count_params(cfg) == presets.PUBLISHED_PARAM_COUNTS[name]


def test_vocab_and_tying_by_size():
    for n in ("qwen2.5-0.5b", "qwen2.5-1.5b", "qwen2.5-3b"):
        c = presets.get(n)
        assert c.vocab_size == 151_936 and c.tie_word_embeddings
    for n in ("qwen2.5-7b", "qwen2.5-14b", "qwen2.5-32b", "qwen2.5-72b"):
        c = presets.get(n)
        assert c.vocab_size == 152_064 and not c.tie_word_embeddings


def test_count_params_matches_allocated_model():
    cfg = presets.get("tiny")
    m = init_model(cfg)
    n = sum(x.size for x in jax.tree.leaves(nnx.state(m, nnx.Param)))
    assert n == count_params(cfg)
    untied = cfg.replace(tie_word_embeddings=False)
    assert count_params(untied) == count_params(cfg) + cfg.vocab_size * cfg.hidden_size


def test_unknown_preset_lists_known():
    with pytest.raises(KeyError, match="qwen2.5-7b"):
        presets.get("qwen3-7b")


@pytest.mark.parametrize("field,value,msg", [
    ("num_heads", 3, "num_heads"),            # 64 % 3 != 0
    ("num_kv_heads", 3, "multiple of num_kv_heads"),
    ("vocab_size", 0, "vocab_size"),
    ("dtype", "float64", "dtype"),
    ("rope_theta", -1.0, "rope_theta"),
    ("rms_norm_eps", 0.0, "rms_norm_eps"),
    ("head_dim", 7, "head_dim"),
])
def test_config_validation_names_field(field, value, msg):
    with pytest.raises(ValueError, match=msg):
        presets.get("tiny", **{field: value})


def _np_attention(q, k, v):
    """Plain numpy causal attention with K/V heads repeated (the textbook form)."""
    b, t, h, d = q.shape
    g = h // k.shape[2]
    k = np.repeat(k, g, axis=2)
    v = np.repeat(v, g, axis=2)
    s = np.einsum("bthd,bshd->bhts", q, k) / np.sqrt(d)
    s = np.where(np.tril(np.ones((t, t), bool))[None, None], s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    return np.einsum("bhts,bshd->bthd", p, v)


@pytest.mark.parametrize("heads,kv", [(4, 1), (6, 2), (4, 4)])
def test_gqa_matches_repeated_kv_numpy(heads, kv):
    r = np.random.default_rng(0)
    q = r.normal(size=(2, 7, heads, 8)).astype(np.float32)
    k = r.normal(size=(2, 7, kv, 8)).astype(np.float32)
    v = r.normal(size=(2, 7, kv, 8)).astype(np.float32)
    out, _ = DenseCausal()(jnp.asarray(q), jnp.asarray(k), jnp.asarray(v), layer=0, state=None)
    np.testing.assert_allclose(np.asarray(out), _np_attention(q, k, v), rtol=1e-5, atol=1e-5)


@pytest.fixture(scope="module")
def tiny():
    return init_model(presets.get("tiny"), seed=1)


def test_forward_shape_dtype(tiny):
    ids = jnp.asarray(np.random.default_rng(0).integers(0, 512, (3, 11)), jnp.int32)
    logits = tiny(ids)
    assert logits.shape == (3, 11, 512) and logits.dtype == jnp.float32
    assert np.isfinite(np.asarray(logits)).all()


def test_causal_future_tokens_do_not_matter(tiny):
    r = np.random.default_rng(1)
    a = r.integers(0, 512, (1, 12))
    b = a.copy()
    b[0, 7:] = r.integers(0, 512, 5)
    la, lb = np.asarray(tiny(jnp.asarray(a))), np.asarray(tiny(jnp.asarray(b)))
    np.testing.assert_allclose(la[0, :7], lb[0, :7], rtol=1e-6, atol=1e-6)
    assert np.abs(la[0, 7:] - lb[0, 7:]).max() > 1e-3


def test_explicit_positions_and_segments_equal_separate_sequences(tiny):
    """Two sequences packed in one row with segment ids and restarting positions give the same logits
    as running them separately: the contract the trainer's packing and the engine's paths rely on."""
    r = np.random.default_rng(2)
    s1, s2 = r.integers(0, 512, 5), r.integers(0, 512, 8)
    packed = jnp.asarray(np.concatenate([s1, s2])[None], jnp.int32)
    pos = jnp.asarray(np.concatenate([np.arange(5), np.arange(8)])[None], jnp.int32)
    seg = jnp.asarray(np.array([1] * 5 + [2] * 8)[None], jnp.int32)
    out, _ = tiny.forward(packed, pos, state=seg)
    np.testing.assert_allclose(np.asarray(out)[0, :5], np.asarray(tiny(jnp.asarray(s1[None])))[0], atol=1e-5)
    np.testing.assert_allclose(np.asarray(out)[0, 5:], np.asarray(tiny(jnp.asarray(s2[None])))[0], atol=1e-5)


def test_position_offset_changes_output(tiny):
    """Rotary positions are really used: shifting them changes the logits (beyond the first token)."""
    ids = jnp.asarray([[5, 9, 13, 2]], jnp.int32)
    base, _ = tiny.forward(ids)
    shifted, _ = tiny.forward(ids, jnp.asarray([[100, 101, 102, 103]], jnp.int32))
    # relative positions are unchanged, so attention scores are identical up to float error
    np.testing.assert_allclose(np.asarray(base), np.asarray(shifted), atol=2e-4)
    spread, _ = tiny.forward(ids, jnp.asarray([[0, 3, 7, 20]], jnp.int32))
    assert np.abs(np.asarray(base)[0, 1:] - np.asarray(spread)[0, 1:]).max() > 1e-3


def test_attention_is_swappable(tiny):
    """A custom back-end receives GQA-shaped q/k/v and its state is threaded through every layer."""
    calls = []

    def counting(q, k, v, *, layer, state):
        calls.append((q.shape, k.shape))
        out, _ = DenseCausal()(q, k, v, layer=layer, state=None)
        return out, state + 1

    ids = jnp.asarray([[1, 2, 3]], jnp.int32)
    out, st = tiny.forward(ids, attention=counting, state=jnp.int32(0))
    assert int(st) == tiny.cfg.num_layers
    assert calls[0] == ((1, 3, 4, 16), (1, 3, 2, 16))
    np.testing.assert_allclose(np.asarray(out), np.asarray(tiny(ids)), atol=1e-6)


def test_remat_and_hidden(tiny):
    ids = jnp.asarray([[1, 2, 3, 4]], jnp.int32)
    a, _ = tiny.forward(ids, remat=True)
    np.testing.assert_allclose(np.asarray(a), np.asarray(tiny(ids)), atol=1e-6)
    h, _ = tiny.forward(ids, return_hidden=True)
    assert h.shape == (1, 4, 64)
    np.testing.assert_allclose(np.asarray(tiny.logits(h)), np.asarray(a), atol=1e-5)


def test_bf16_compute_close_to_fp32(tiny):
    cfg = tiny.cfg.replace(dtype="bfloat16", param_dtype="bfloat16")
    m16 = init_model(cfg, seed=1)
    ids = jnp.asarray(np.random.default_rng(3).integers(0, 512, (2, 9)), jnp.int32)
    l16 = m16(ids)
    assert l16.dtype == jnp.float32 and m16.embed[...].dtype == jnp.bfloat16
    l32 = np.asarray(tiny(ids))
    assert np.abs(np.asarray(l16) - l32).max() < 0.05 * np.abs(l32).max() + 1e-2


def test_gradients_flow_to_every_param(tiny):
    ids = jnp.asarray([[1, 2, 3, 4, 5]], jnp.int32)

    def loss(m):
        return jnp.mean(jax.nn.log_softmax(m(ids))[..., 0])

    grads = nnx.grad(loss)(tiny)
    for path, g in jax.tree_util.tree_leaves_with_path(nnx.state(grads)):
        assert np.abs(np.asarray(g)).max() > 0, path


def _dot_generals(jaxpr, out):
    for e in jaxpr.eqns:
        if e.primitive.name == "dot_general":
            (lhs_c, rhs_c), _ = e.params["dimension_numbers"]
            out.append((tuple(e.invars[0].aval.shape), tuple(e.invars[1].aval.shape), tuple(lhs_c), tuple(rhs_c),
                        tuple(e.outvars[0].aval.shape)))
        for sub in jax.extend.core.jaxprs_in_params(e.params):
            _dot_generals(sub, out)
    return out


def test_weight_gradients_contract_one_dimension(tiny):
    """Every projection of the decoder runs on [B * T, h] rows, so the backward's weight gradient is one dot that
    contracts one dimension (the rows). Contracting [B, T] as two dimensions makes XLA transpose the output gradient
    first; XLA:CPU fused that transpose with the gradient's producers into strided loops, 38% of the tiny RL update
    (BUILD.md issue 52: 2.5 -> 1.35 s per update step). Only attention's own products (dense GQA here) may contract
    two dimensions."""
    gd, params = nnx.split(tiny, nnx.Param)
    ids = jnp.zeros((2, 8), jnp.int32)

    def loss(p):
        return nnx.merge(gd, p).forward(ids, return_hidden=True)[0].sum()

    dots = _dot_generals(jax.make_jaxpr(jax.grad(loss))(params).jaxpr, [])
    cfg = tiny.cfg
    weights = {s[1:] for s in param_shapes(cfg).values() if len(s) == 3}  # [L, in, out]
    grads = [d for d in dots if d[4] in weights or d[4][::-1] in weights]
    assert len(grads) >= 7, dots  # q, k, v, o, gate, up, down
    assert all(len(d[2]) == 1 and len(d[3]) == 1 for d in grads), [d for d in grads if len(d[2]) > 1]
