"""memjax.engine.paged_kv: the page-by-page reference against dense attention and the full forward."""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from memjax.engine.paged_kv import PagedAttention, page_buckets, paged_attention, write_indices, write_kv
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


def test_write_kv_writes_valid_rows_and_drops_padding():
    pages = jnp.zeros((2, 1, 4, 2, 3))
    new = jnp.ones((1, 3, 1, 3))
    out = np.asarray(write_kv(pages, 1, new, jnp.asarray([[2, 3]], jnp.int32), jnp.asarray([1]), jnp.asarray([2])))
    assert out[1, 0, 2, 1].sum() == 3 and out[1, 0, 3, 0].sum() == 3  # positions 1, 2
    assert out.sum() == 6  # the padding row (position 3) is dropped: the null page stays zero


def test_write_indices_are_distinct_and_out_of_bounds_when_not_written():
    """Rows past n_valid or on the null page get distinct page ids >= P (dropped by the scatter), so the
    scatter's indices are all distinct (it is declared unique: plain stores on a GPU, no CAS loop)."""
    shape = (1, 1, 5, 4, 2)  # P = 5 pages of S = 4
    pt = jnp.asarray([[1, 2], [3, 0], [0, 0]], jnp.int32)  # sequence 1's second page is not allocated
    page, off, write = write_indices(shape, pt, jnp.asarray([2, 3, 0]), jnp.asarray([4, 3, 0]), 4)
    page, off, write = map(np.asarray, (page, off, write))
    assert write.tolist() == [True] * 4 + [True, False, False, False] + [False] * 4
    assert page[:5].tolist() == [1, 1, 2, 2, 3] and off[:5].tolist() == [2, 3, 0, 1, 3]
    assert (page[~write] >= 5).all() and len(set(zip(page.tolist(), off.tolist()))) == 12


@pytest.mark.parametrize("schedule", ["split", "mixed"])
def test_engine_kv_writes_are_unique(schedule, monkeypatch):
    """Every KV scatter of a run with preemption, prefix sharing and continuations writes each (page,
    offset) at most once and never a valid row to the null page: the engine's CPU results then do not
    depend on which duplicate wins (undefined on a GPU), and `unique_indices=True` in write_kv is true."""
    from memjax.engine import Engine, EngineConfig, KVCacheOptions, SamplingParams
    from memjax.engine import paged_kv as pa

    found = []

    def checked(pages, layer, new, page_table, start, n_valid, scale=1.0):
        t = new.shape[1]
        page, off, write = write_indices(pages.shape, page_table, start, n_valid, t)
        key = jnp.where(write, page * pages.shape[3] + off, -1 - jnp.arange(page.shape[0]))
        srt = jnp.sort(key)
        valid = (jnp.arange(t)[None] < n_valid[:, None]).reshape(-1)
        jax.debug.callback(lambda d, z: found.append((int(d), int(z))), (srt[1:] == srt[:-1]).sum(),
                           (valid & ~write).sum())
        return write_kv(pages, layer, new, page_table, start, n_valid, scale)

    monkeypatch.setattr(pa, "write_kv", checked)
    cfg = presets.get("tiny")
    eng = Engine(init_model(cfg, seed=0), EngineConfig(max_slots=4, page_size=4, window=48, prefill_slots=2,
                                                       prefill_chunk=8, schedule=schedule, progress=False,
                                                       kv=KVCacheOptions(num_pages=14)))
    r = np.random.default_rng(0)
    prompts = [r.integers(0, cfg.vocab_size, int(k)).tolist() for k in r.integers(3, 30, 6)]
    prompts += [prompts[0]] * 3  # a prefix-sharing group
    outs = eng.generate(prompts, [SamplingParams(temperature=1.0, max_tokens=int(k), seed=i)
                                  for i, k in enumerate(r.integers(8, 24, len(prompts)))])
    parent = eng.generate([prompts[1]], SamplingParams(temperature=0.0, max_tokens=9))[0]
    retained = eng.submit(prompts[2][:9], SamplingParams(temperature=0.0, max_tokens=6), retain=True)
    done = {}
    while retained not in done:
        done.update({c.request_id: c for c in eng.step()})
    child = eng.generate([[5, 6, 7]], SamplingParams(temperature=0.0, max_tokens=5))  # unrelated
    cont = eng.submit([1, 2, 3], SamplingParams(temperature=0.0, max_tokens=5), parent=done[retained])
    while cont not in done:
        done.update({c.request_id: c for c in eng.step()})
    eng.release(done[retained])
    assert len(outs) == 9 and parent.token_ids and child and done[cont].token_ids
    assert eng.stats["preemptions"] > 0 and eng.stats["shared_pages"] > 0 and eng.stats["continued_tokens"] > 0
    assert found and all(d == 0 for d, _ in found) and all(z == 0 for _, z in found)


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
