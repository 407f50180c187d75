"""memjax.engine.Engine end to end: parity with transformers and with the full forward, continuous
batching, preemption under memory pressure, prefix sharing, streaming, weight swaps, errors."""

import numpy as np
import pytest

import jax
import jax.numpy as jnp

from memjax import load_hf
from memjax.engine import Engine, EngineConfig, KVCacheOptions, KernelOptions, SamplingParams
from memjax.model import greedy_generate

from conftest import GOLDEN_MODELS, golden_dir, golden_ref
from tests.engine_shapes import SMALL as CFG  # the loop other modules compile too



@pytest.fixture(scope="module")
def model():
    return load_hf(golden_dir("untied_kv2"))


@pytest.fixture(scope="module")
def engine(model):
    return Engine(model, EngineConfig(**CFG))


def _prompts(n, seed=0, lo=1, hi=40, vocab=512):
    r = np.random.default_rng(seed)
    return [r.integers(0, vocab, int(k)).tolist() for k in r.integers(lo, hi, n)]


@pytest.mark.parametrize("name", GOLDEN_MODELS)
def test_greedy_equals_transformers_batched_and_alone(name):
    ref = golden_ref(name)
    m = load_hf(golden_dir(name))
    eng = Engine(m, EngineConfig(**CFG))
    prompt = ref["greedy_prompt"].tolist()
    greedy = SamplingParams(temperature=0.0, max_tokens=len(ref["greedy_ids"]))
    alone = eng.generate([prompt], greedy)[0]
    assert alone.token_ids == ref["greedy_ids"].tolist() and alone.finish_reason == "length"
    # the same prompt among others of different lengths, more prompts than slots (continuous batching)
    others = _prompts(6, seed=1, hi=30)
    batch = eng.generate(others[:3] + [prompt] + others[3:], greedy)
    assert batch[3].token_ids == ref["greedy_ids"].tolist()


def test_batched_outputs_equal_reference_decoder(model, engine):
    prompts = _prompts(9, seed=2)
    outs = engine.generate(prompts, SamplingParams(temperature=0.0, max_tokens=7))
    for p, o in zip(prompts, outs):
        toks, lps = greedy_generate(model, p, 7)
        assert o.token_ids == toks and o.prompt_len == len(p)
        np.testing.assert_allclose(o.logprobs, lps, atol=1e-5)


def test_logprobs_equal_full_forward_log_softmax(model, engine):
    """Sampled (T=0.7) tokens' returned log-probs = log_softmax(logits / T) of a full forward pass."""
    prompts = _prompts(5, seed=3)
    outs = engine.generate(prompts, [SamplingParams(temperature=0.7, max_tokens=9, seed=i) for i in range(5)])
    for p, o in zip(prompts, outs):
        seq = jnp.asarray([p + o.token_ids], jnp.int32)
        logp = np.asarray(jax.nn.log_softmax(model(seq)[0] / 0.7, axis=-1))
        want = [logp[len(p) - 1 + i, t] for i, t in enumerate(o.token_ids)]
        np.testing.assert_allclose(o.logprobs, want, atol=1e-5)


def test_sample_independent_of_batch_neighbours(engine):
    p = _prompts(1, seed=4)[0]
    sp = SamplingParams(temperature=1.0, max_tokens=10, seed=1234)
    alone = engine.generate([p], sp)[0]
    crowd = engine.generate(_prompts(5, seed=5) + [p], [SamplingParams(temperature=1.0, max_tokens=10)] * 5 + [sp])
    assert crowd[-1].token_ids == alone.token_ids


def test_small_pool_preempts_and_matches_large_pool(model, engine):
    prompts = _prompts(12, seed=6)
    sp = [SamplingParams(temperature=1.0, top_p=0.9, max_tokens=int(k), seed=i)
          for i, k in enumerate(np.random.default_rng(7).integers(5, 40, 12))]
    ref = engine.generate(prompts, sp)
    small = Engine(model, EngineConfig(**CFG, kv=KVCacheOptions(num_pages=18)))
    out = small.generate(prompts, sp)
    assert small.stats["preemptions"] > 0 and sum(o.preemptions for o in out) == small.stats["preemptions"]
    for a, b in zip(ref, out):
        assert a.token_ids == b.token_ids and a.finish_reason == b.finish_reason
        np.testing.assert_allclose(a.logprobs, b.logprobs, atol=1e-6)
    assert int(small._pool.n_free) == small.num_pages - 1 and int(small._pool.refcount.sum()) == 0


def test_shared_prefix_equals_unshared(engine):
    p = _prompts(1, seed=8, lo=30, hi=31)[0]
    group = [SamplingParams(temperature=1.0, max_tokens=12, seed=100 + i) for i in range(6)]
    before = dict(engine.stats)
    shared = engine.generate([p] * 6, group)
    used = {k: engine.stats[k] - before.get(k, 0) for k in ("shared_pages", "prefill_tokens")}
    # 6 members, 4 slots. split: the first wave (1 source + 3 sharers) finishes together (same max_tokens,
    # no stop ids; the source's decoding pauses while its sharers prefill) and frees its pages, so the second
    # wave has one source again and one sharer. mixed: the source decodes while its sharers prefill, so it
    # finishes a round early and members 5 and 6 share from running members: 5 sharers, one source.
    k = (len(p) - 1) // 4
    sharers = {"split": 4, "mixed": 5}[engine.config.schedule]
    assert used["shared_pages"] == sharers * k
    assert used["prefill_tokens"] == (6 - sharers) * len(p) + sharers * (len(p) - 4 * k)
    alone = [engine.generate([p], [sp])[0] for sp in group]
    for a, b in zip(shared, alone):
        assert a.token_ids == b.token_ids
        np.testing.assert_allclose(a.logprobs, b.logprobs, atol=1e-6)
    assert len({tuple(o.token_ids) for o in shared}) > 1  # different seeds really sample differently


def test_streaming_submit_next_turn(engine):
    """A workflow submits turn 2 of a conversation as soon as turn 1 finishes, while others still run."""
    greedy = SamplingParams(temperature=0.0, max_tokens=5)
    long = engine.submit(_prompts(1, seed=9)[0], SamplingParams(temperature=0.0, max_tokens=40))
    first = engine.submit([1, 2, 3], greedy)
    results, second = {}, None
    while engine.num_unfinished:
        for c in engine.step(max_rounds=4):
            results[c.request_id] = c
            if c.request_id == first:
                second = engine.submit([1, 2, 3] + c.token_ids + [7], greedy)
    assert second is not None and {long, first, second} <= results.keys()
    assert results[second].prompt_len == 3 + 5 + 1


def test_stop_tokens_window_and_overlong(model, engine):
    p = _prompts(1, seed=10)[0]
    free = engine.generate([p], SamplingParams(temperature=0.0, max_tokens=8))[0]
    stop_at = free.token_ids[2]
    out = engine.generate([p], SamplingParams(temperature=0.0, max_tokens=8, stop_token_ids=(stop_at,)))[0]
    k = free.token_ids.index(stop_at)
    assert out.finish_reason == "stop" and out.token_ids == free.token_ids[: k + 1]
    w = engine.generate([list(range(1, 61))], SamplingParams(temperature=0.0, max_tokens=50))[0]
    assert w.finish_reason == "window" and w.prompt_len + len(w.token_ids) == 64
    with pytest.raises(ValueError, match="leaves no room in the 64-token window"):
        engine.submit(list(range(70)))
    trunc = Engine(model, EngineConfig(**{**CFG, "overlong_prompt": "truncate_left"}))
    t = trunc.generate([list(range(100))], SamplingParams(temperature=0.0, max_tokens=4))[0]
    assert t.prompt_truncated == 100 - 63 and t.finish_reason == "window" and len(t.token_ids) == 1


def test_bad_requests(engine):
    with pytest.raises(ValueError, match="prompt is empty"):
        engine.submit([])
    with pytest.raises(ValueError, match="outside"):
        engine.submit([5, 1000])
    with pytest.raises(ValueError, match="stop ids"):
        engine.submit([1], SamplingParams(stop_token_ids=(1, 2, 3, 4, 5)))
    with pytest.raises(ValueError, match="3 SamplingParams for 2 prompts"):
        engine.generate([[1], [2]], [SamplingParams()] * 3)
    with pytest.raises(ValueError, match="top_p"):
        SamplingParams(top_p=0.0)
    with pytest.raises(ValueError, match="window=60 must be a multiple"):
        EngineConfig(window=60, page_size=16)
    with pytest.raises(ValueError, match="num_pages=5"):
        EngineConfig(window=64, page_size=4, kv=KVCacheOptions(num_pages=5))


def test_engines_of_one_shape_share_the_loop_and_each_generates_with_its_own_weights(model, engine):
    """A second Engine of the module engine's model architecture and config runs the same jitted loop (nothing
    traced or compiled again) with its own weights; another config gets another loop."""
    other = load_hf(golden_dir("untied_kv2"))
    other.lm_head[...] = -other.lm_head[...]
    p = _prompts(1, seed=12)[0]
    greedy = SamplingParams(temperature=0.0, max_tokens=6)
    a = engine.generate([p], greedy)[0]
    compiled = engine._run._cache_size()
    eng = Engine(other, EngineConfig(**CFG))
    assert eng._run is engine._run
    b = eng.generate([p], greedy)[0]
    assert eng._run._cache_size() == compiled
    assert a.token_ids == greedy_generate(model, p, 6)[0] and b.token_ids == greedy_generate(other, p, 6)[0]
    assert a.token_ids != b.token_ids and engine.generate([p], greedy)[0].token_ids == a.token_ids
    assert Engine(other, EngineConfig(**{**CFG, "max_slots": 2}))._run is not engine._run


def test_update_weights_without_recompile(model):
    eng = Engine(model, EngineConfig(**CFG))
    p = _prompts(1, seed=11)[0]
    greedy = SamplingParams(temperature=0.0, max_tokens=6)
    a = eng.generate([p], greedy)[0]
    compiled = eng._run._cache_size()
    other = load_hf(golden_dir("untied_kv2"))
    other.lm_head[...] = -other.lm_head[...]
    eng.update_weights(other)
    b = eng.generate([p], greedy)[0]
    assert eng._run._cache_size() == compiled
    assert b.token_ids == greedy_generate(other, p, 6)[0] and b.token_ids != a.token_ids
    with pytest.raises(ValueError, match="structure, shapes or dtypes"):
        eng.update_weights(load_hf(golden_dir("tied_kv1")))


def test_pallas_attention_engine_matches_reference(model, engine):
    """EngineConfig.kernels.attention="pallas" (interpret mode on CPU, split-K decode) gives the same tokens."""
    prompts = _prompts(3, seed=12)
    greedy = SamplingParams(temperature=0.0, max_tokens=6)
    ref = engine.generate(prompts, greedy)
    pal = Engine(model, EngineConfig(**{**CFG, "page_size": 16, "window": 64},
                                     kernels=KernelOptions(attention="pallas", decode_splits=2)))
    out = pal.generate(prompts, greedy)
    for a, b in zip(ref, out):
        assert a.token_ids == b.token_ids
        np.testing.assert_allclose(a.logprobs, b.logprobs, atol=1e-5)


def test_abort_queued_and_running_requests(engine):
    """Aborted requests never come back (queued ones dropped, running ones discarded on completion) and the
    requests beside them produce what they produce alone."""
    prompts = _prompts(8, seed=11)
    sp = SamplingParams(temperature=1.0, max_tokens=12, seed=9)
    rids = [engine.submit(p, sp) for p in prompts]
    got = {c.request_id: c for c in engine.step(max_rounds=2)}  # some running, some still queued
    early = set(got)
    engine.abort(rids[::2])
    assert engine.num_unfinished == len([r for r in rids[1::2] if r not in got])
    while engine.num_unfinished:
        for c in engine.step():
            got[c.request_id] = c
    assert not (set(got) - early) & set(rids[::2]) and set(rids[1::2]) <= set(got)
    alone = engine.generate([prompts[i] for i in range(1, 8, 2)], sp)
    assert [got[r].token_ids for r in rids[1::2]] == [c.token_ids for c in alone]
    engine.abort([10**9])  # unknown rids are ignored
    assert engine.num_unfinished == 0 and not engine.book.live


def test_attention_default_is_auto_with_measured_split_k():
    """Pallas paged attention is the GPU default (H100 sweep), auto split-K from the same sweep; off GPU "auto"
    keeps the engine's built-in reference path (no kernel wrapper)."""
    from memjax.engine.engine import decode_splits_auto

    cfg = EngineConfig()
    assert cfg.kernels.attention == "auto" and cfg.kernels.decode_splits == 0
    assert decode_splits_auto(256, 2) == 2 and decode_splits_auto(128, 4) == 2 and decode_splits_auto(64, 2) == 4
    with pytest.raises(ValueError, match="decode_splits"):
        EngineConfig(kernels=KernelOptions(decode_splits=-1))
    if jax.default_backend() == "cpu":
        from memjax.engine.paged_kv import paged_attention
        from memjax.kernels.paged_attention import resolve_impl
        assert resolve_impl("auto", 16, 128) == "reference"
        assert paged_attention is not None
