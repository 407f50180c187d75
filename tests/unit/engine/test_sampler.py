"""memjax.engine.sampler: distribution tests (chi-square), nucleus/top-k bounds, key independence."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from memjax.engine.sampler import Truncation, allowed_mask, sample, search_passes, search_ways

# chi-square critical values at p = 0.001 (df -> value), from standard tables
CHI2_999 = {7: 24.322, 9: 27.877}


def _draw(logits, n, temperature=1.0, top_p=1.0, top_k=0, pos=5):
    lg = jnp.broadcast_to(jnp.asarray(logits, jnp.float32), (n, len(logits)))
    tok, lp = jax.jit(sample)(lg, jnp.full(n, temperature, jnp.float32), jnp.full(n, top_p, jnp.float32),
                              jnp.full(n, top_k, jnp.int32), jnp.arange(n, dtype=jnp.int32), jnp.full(n, pos, jnp.int32))
    return np.asarray(tok), np.asarray(lp)


@pytest.mark.parametrize("temperature", [1.0, 0.6])
def test_empirical_distribution_matches_softmax(temperature):
    logits = np.array([1.0, 0.2, -0.5, 2.0, 0.0, -1.5, 0.7, 1.3])
    n = 20_000
    tok, lp = _draw(logits, n, temperature)
    p = np.exp(logits / temperature - np.logaddexp.reduce(logits / temperature))
    counts = np.bincount(tok, minlength=len(logits))
    chi2 = ((counts - n * p) ** 2 / (n * p)).sum()
    assert chi2 < CHI2_999[len(logits) - 1], (chi2, counts, n * p)
    np.testing.assert_allclose(lp, np.log(p)[tok], atol=1e-5)


def test_top_p_never_leaves_nucleus_and_renormalises():
    r = np.random.default_rng(0)
    logits = r.normal(size=10) * 2
    p = np.exp(logits - np.logaddexp.reduce(logits))
    order = np.argsort(-p)
    size = int(np.searchsorted(np.cumsum(p[order]), 0.8) + 1)
    nucleus = set(order[:size].tolist())
    tok, lp = _draw(logits, 20_000, top_p=0.8)
    assert set(tok.tolist()) <= nucleus and set(tok.tolist()) == nucleus
    q = p[order[:size]] / p[order[:size]].sum()
    counts = np.bincount(tok, minlength=10)[order[:size]]
    chi2 = ((counts - 20_000 * q) ** 2 / (20_000 * q)).sum()
    assert chi2 < 30.0
    np.testing.assert_allclose(lp, np.log(p)[tok], atol=1e-5)  # log-prob before truncation


@pytest.mark.parametrize("ways", [1, 3, 15])  # 1: the CPU's bisection; 15: a GPU's 15 thresholds per read
def test_top_k_and_mask_against_sort(ways):
    r = np.random.default_rng(1)
    lg = r.normal(size=(6, 300)).astype(np.float32)
    mask = lambda p, k, **tr: np.asarray(allowed_mask(jnp.asarray(lg), jnp.full(6, p, jnp.float32),
                                                      jnp.full(6, k, jnp.int32), Truncation(ways=ways, **tr)))
    for k in (1, 5, 64, 300):
        for tr in ({}, {"top_p": False}):
            m = mask(1.0, k, **tr)
            assert (m.sum(-1) == k).all()
            assert (np.sort(lg, -1)[:, -k][:, None] <= np.where(m, lg, np.inf)).all()
    p = np.exp(lg - np.logaddexp.reduce(lg, -1, keepdims=True))
    for top_p in (0.3, 0.9, 0.999):
        for tr in ({}, {"top_k": False}):
            m = mask(top_p, 0, **tr)
            for row in range(6):
                srt = np.sort(p[row])[::-1]
                assert m[row].sum() == int(np.searchsorted(np.cumsum(srt), top_p) + 1)
    for top_p, k in ((0.5, 20), (0.999, 7)):  # the nucleus within the top-k set, renormalised
        m = mask(top_p, k)
        for row in range(6):
            srt = np.sort(p[row])[::-1][:k]
            assert m[row].sum() == min(k, int(np.searchsorted(np.cumsum(srt / srt.sum()), top_p) + 1))
    assert (mask(0.5, 20, top_k=False) == mask(0.5, 0)).all()  # a search switched off ignores its argument
    assert (mask(0.5, 20, top_p=False) == mask(1.0, 20)).all()
    assert mask(0.5, 20, top_k=False, top_p=False).all()


def test_search_passes_and_ways():
    assert [search_passes(w) for w in (1, 3, 15)] == [32, 16, 8]
    assert search_ways("gpu") == search_ways("cuda") == 15 and search_ways("cpu") == 1
    with pytest.raises(ValueError, match="ways must be an int >= 1"):
        Truncation(ways=0)


def test_greedy_and_key_independence():
    logits = np.array([0.1, 3.0, 2.9, -1.0])
    tok, lp = _draw(logits, 4, temperature=0.0)
    assert (tok == 1).all()
    np.testing.assert_allclose(lp, logits[1] - np.logaddexp.reduce(logits), atol=1e-6)
    # the same (seed, position) gives the same token whatever the row and the other rows are
    lg = jnp.asarray(np.random.default_rng(2).normal(size=(3, 50)), jnp.float32)
    args = lambda seeds: (jnp.ones(3), jnp.ones(3), jnp.zeros(3, jnp.int32), jnp.asarray(seeds, jnp.int32),
                          jnp.asarray([4, 4, 4], jnp.int32))
    a, _ = sample(lg, *args([7, 8, 9]))
    b, _ = sample(lg[::-1], *args([9, 8, 7]))
    assert np.asarray(a).tolist() == np.asarray(b)[::-1].tolist()


def test_processed_logprobs_are_under_the_truncated_distribution():
    """logprobs="processed": log p(token) renormalised over the top-k / top-p set (numpy sort reference);
    raw rows and greedy rows keep the full-vocabulary value."""
    r = np.random.default_rng(3)
    n, v, temp, top_p, top_k = 8, 40, 0.7, 0.75, 12
    lg = (r.normal(size=(n, v)) * 2).astype(np.float32)
    temps = np.where(np.arange(n) == 7, 0.0, temp).astype(np.float32)  # row 7 greedy
    processed = np.arange(n) % 2 == 1  # odd rows processed
    tok, lp = jax.jit(sample)(jnp.asarray(lg), jnp.asarray(temps), jnp.full(n, top_p, jnp.float32),
                              jnp.full(n, top_k, jnp.int32), jnp.arange(n, dtype=jnp.int32),
                              jnp.full(n, 3, jnp.int32), jnp.asarray(processed))
    tok, lp = np.asarray(tok), np.asarray(lp)
    for i in range(n):
        t = 1.0 if temps[i] == 0 else temp
        s = lg[i].astype(np.float64) / t
        raw = s - np.logaddexp.reduce(s)
        if temps[i] == 0 or not processed[i]:
            np.testing.assert_allclose(lp[i], raw[tok[i]], atol=1e-5)
            continue
        keep = np.argsort(-s)[:top_k]  # top-k, then the smallest nucleus of mass >= top_p within it
        q = np.exp(s[keep] - np.logaddexp.reduce(s[keep]))
        keep = keep[: int(np.searchsorted(np.cumsum(q), top_p) + 1)]
        assert tok[i] in keep
        np.testing.assert_allclose(lp[i], s[tok[i]] - np.logaddexp.reduce(s[keep]), atol=1e-5)
        assert lp[i] > raw[tok[i]] + 1e-3  # renormalising over a strict subset raises the log-prob


@pytest.mark.parametrize("v", [8_192, 151_936, 10_007])  # 2^13 (blocks of 128), Qwen2.5's vocabulary, a prime (padded)
def test_blocked_argmax_is_jnp_argmax(v):
    from memjax.engine.sampler import block_argmax, vocab_block

    blk = vocab_block(v)
    assert blk * blk >= v and (v % blk == 0 or blk == 1024)
    r = np.random.default_rng(v)
    x = r.normal(size=(6, v)).astype(np.float32)
    x[1, [5, v - 3]] = 50.0  # tie across blocks: the first wins
    x[2, [v // 2, v // 2 + 1]] = 50.0  # tie inside a block
    x[3, :] = -np.inf
    x[4, v - 1] = 50.0  # the last token (padding must never win)
    x[5, [7, v - 1]] = np.nan  # a broken row: any token id in range, never the padding
    got = np.asarray(jax.jit(block_argmax)(jnp.asarray(x)))
    np.testing.assert_array_equal(got[:5], np.asarray(jnp.argmax(jnp.asarray(x[:5]), -1)))
    assert 0 <= got[5] < v


@pytest.mark.parametrize("v", [12_288, 10_007])
def test_sampling_over_many_blocks_matches_softmax(v):
    """Inversion sampling across blocks (and padding): 8 likely tokens in different blocks, the rest improbable."""
    hot = np.linspace(3, v - 2, 8).astype(int)
    logits = np.full(v, -30.0, np.float32)
    logits[hot] = [1.0, 0.2, -0.5, 2.0, 0.0, -1.5, 0.7, 1.3]
    n = 20_000
    tok, lp = _draw(logits, n, 0.8)
    assert set(tok.tolist()) <= set(hot.tolist())
    s = logits.astype(np.float64) / 0.8
    p = np.exp(s - np.logaddexp.reduce(s))
    counts = np.array([(tok == h).sum() for h in hot])
    chi2 = ((counts - n * p[hot]) ** 2 / (n * p[hot])).sum()
    assert chi2 < CHI2_999[7], (chi2, counts, n * p[hot])
    np.testing.assert_allclose(lp, np.log(p)[tok], atol=1e-5)
