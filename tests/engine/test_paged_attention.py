"""memjax.engine.paged_attention: the page-by-page reference against dense attention and the full forward."""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from memjax.engine.paged_attention import PagedAttention, page_buckets, paged_attention, write_kv
from memjax.model import grouped_attention, init_model, presets


def _scatter_pages(k, page_table, s, n_pages):
    """Place dense k [b, T, KV, D] into a pool [1, KV, P, S, D] following page_table."""
    b, t, kv, d = k.shape
    pool = np.zeros((1, kv, n_pages, s, d), np.float32)
    for i in range(b):
        for pos in range(t):
            pool[0, :, page_table[i, pos // s], pos % s] = k[i, pos]
    return pool


@pytest.mark.parametrize("h,kv,s", [(4, 1, 3), (6, 2, 4), (4, 4, 5)])
def test_matches_dense_grouped_attention(h, kv, s):
    r = np.random.default_rng(0)
    b, t, d = 3, 11, 8
    q, k, v = (r.normal(size=(b, t, n, d)).astype(np.float32) for n in (h, kv, kv))
    mp = -(-t // s)
    perm = r.permutation(np.arange(1, 1 + b * mp)).reshape(b, mp)  # scattered, non-contiguous pages
    pk, pv = _scatter_pages(k, perm, s, 1 + b * mp), _scatter_pages(v, perm, s, 1 + b * mp)
    lens = np.array([11, 7, 1])
    q_pos = np.broadcast_to(np.arange(t), (b, t))
    out = np.asarray(paged_attention(jnp.asarray(q), jnp.asarray(pk), jnp.asarray(pv), 0, jnp.asarray(perm),
                                     jnp.asarray(q_pos, jnp.int32), jnp.asarray(lens, jnp.int32)))
    mask = (np.tril(np.ones((t, t), bool))[None] & (np.arange(t)[None, None] < lens[:, None, None]))
    ref = np.asarray(grouped_attention(jnp.asarray(q), jnp.asarray(k), jnp.asarray(v), jnp.asarray(mask)))
    for i, n in enumerate(lens):  # rows at positions >= kv_len are padding
        np.testing.assert_allclose(out[i, :n], ref[i, :n], atol=1e-5)


def test_write_kv_sends_padding_to_null_page():
    pages = jnp.zeros((2, 1, 4, 2, 3))
    new = jnp.ones((1, 3, 1, 3))
    out = np.asarray(write_kv(pages, 1, new, jnp.asarray([[2, 3]], jnp.int32), jnp.asarray([1]), jnp.asarray([2])))
    assert out[1, 0, 2, 1].sum() == 3 and out[1, 0, 3, 0].sum() == 3  # positions 1, 2
    assert out[0].sum() == 0 and out[1, 0, 1].sum() == 0 and out[1, 0, 3, 1].sum() == 0


@pytest.fixture(scope="module")
def model():
    return init_model(presets.get("tiny"), seed=3)


def _run_chunks(model, ids, chunks, s=4):
    cfg = model.cfg
    b, t = ids.shape
    mp = -(-t // s)
    pt = jnp.asarray(1 + np.arange(b * mp).reshape(b, mp)[:, ::-1].copy(), jnp.int32)
    shape = (cfg.num_layers, cfg.num_kv_heads, 1 + b * mp, s, cfg.head_dim)
    state = (jnp.zeros(shape), jnp.zeros(shape))
    outs, start = [], 0
    for c in chunks:
        att = PagedAttention(pt, jnp.full((b,), start, jnp.int32), jnp.full((b,), c, jnp.int32))
        pos = jnp.asarray(np.broadcast_to(start + np.arange(c), (b, c)), jnp.int32)
        logits, state = model.forward(jnp.asarray(ids[:, start:start + c]), pos, attention=att, state=state)
        outs.append(np.asarray(logits))
        start += c
    return np.concatenate(outs, axis=1)


def test_paged_decode_and_chunked_prefill_equal_full_forward(model):
    ids = np.random.default_rng(1).integers(0, 512, (2, 19))
    full = np.asarray(model(jnp.asarray(ids)))
    one_shot = _run_chunks(model, ids, [19])
    chunked = _run_chunks(model, ids, [5, 8, 6])
    decode = _run_chunks(model, ids, [12] + [1] * 7)  # prefill then token-by-token paged decode
    for got in (one_shot, chunked, decode):
        assert np.abs(got - full).max() <= 1e-5
    assert np.abs(chunked - one_shot).max() <= 1e-5


def test_compiled_forward_never_slices_the_whole_pool(model):
    """Regression: k_pages[layer][:, ids] made XLA copy a layer's whole [KV, P, S, D] pool per layer.
    The compiled paged forward may gather pages, but no dynamic-slice may produce a P-page array."""
    cfg, p, s, b, t = model.cfg, 97, 4, 2, 3  # P = 97 appears in no other dimension
    shape = (cfg.num_layers, cfg.num_kv_heads, p, s, cfg.head_dim)
    pt = jnp.asarray([[1, 2, 3], [4, 5, 6]], jnp.int32)

    def step(state, ids, start):
        att = PagedAttention(pt, start, jnp.full((b,), t, jnp.int32))
        pos = start[:, None] + jnp.arange(t, dtype=jnp.int32)[None]
        return model.forward(ids, pos, attention=att, state=state)

    hlo = jax.jit(step).lower((jnp.zeros(shape), jnp.zeros(shape)), jnp.zeros((b, t), jnp.int32),
                              jnp.asarray([4, 0], jnp.int32)).compile().as_text()
    slices = [ln for ln in hlo.splitlines() if "dynamic-slice(" in ln]
    assert not [ln for ln in slices if re.search(rf"\[[\d,]*\b{p}\b[\d,]*\]\S* dynamic-slice\(", ln)], slices


def test_bucketed_page_loop_is_bit_identical_to_dynamic_loop():
    """The default loop runs a static power-of-two page count (masked extra pages); it must give exactly
    the dynamic loop's result for decode and prefill shapes, including sequences with no cached key."""
    r = np.random.default_rng(5)
    kvh, s, d, mp, p = 2, 4, 8, 11, 40
    kp, vp = (jnp.asarray(r.normal(size=(1, kvh, p, s, d)), jnp.float32) for _ in range(2))
    pt = jnp.asarray(r.integers(1, p, (3, mp)), jnp.int32)
    for t, lens in ((1, [5, 0, 17]), (3, [12, 3, 44]), (1, [0, 0, 0]), (2, [29, 1, 2])):
        q = jnp.asarray(r.normal(size=(3, t, 2 * kvh, d)), jnp.float32)
        kv_len = jnp.asarray(lens, jnp.int32)
        q_pos = jnp.maximum(kv_len[:, None] - t + jnp.arange(t, dtype=jnp.int32)[None], 0)
        f = jax.jit(paged_attention, static_argnames="dynamic")
        a = np.asarray(f(q, kp, vp, 0, pt, q_pos, kv_len))
        b = np.asarray(f(q, kp, vp, 0, pt, q_pos, kv_len, dynamic=True))
        assert np.array_equal(a, b), (t, lens, np.abs(a - b).max())
    assert page_buckets(11) == (1, 2, 4, 8, 11) and page_buckets(1) == (1,) and page_buckets(8) == (1, 2, 4, 8)
    # compiled: every page loop of the default path has a trip count XLA knows (no per-page predicate)
    for dyn, known in ((False, True), (True, False)):
        hlo = f.lower(q, kp, vp, 0, pt, q_pos, kv_len, dynamic=dyn).compile().as_text()
        loops = [ln for ln in hlo.splitlines() if " while(" in ln]
        assert loops and all(("known_trip_count" in ln) == known for ln in loops)
