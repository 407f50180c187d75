"""Engine.sleep (hybrid engine): the KV pool and the rollout weights are freed between rollouts, the next
call allocates an empty pool again, and outputs are those of an engine that never slept."""

import jax
import numpy as np
import pytest

from memjax.engine import Engine, EngineConfig, KVCacheOptions, SamplingParams
from memjax.model import init_model, presets
from tests.engine_shapes import SMALL as CFG  # the loop other modules compile too


def _prompts(n, seed):
    r = np.random.default_rng(seed)
    return [r.integers(0, 512, int(k)).tolist() for k in r.integers(3, 30, n)]


def _live_bytes():
    return sum(a.nbytes for a in jax.live_arrays() if not a.is_deleted())


@pytest.fixture(scope="module")
def model():
    return init_model(presets.get("tiny"), seed=3)


def test_sleep_frees_pool_and_weights_and_outputs_are_unchanged(model):
    params = [SamplingParams(temperature=1.0, max_tokens=10, seed=i) for i in range(5)]
    ref = Engine(model, EngineConfig(**CFG))
    eng = Engine(model, EngineConfig(**CFG))
    first = eng.generate(_prompts(5, 0), params)
    assert [c.token_ids for c in first] == [c.token_ids for c in ref.generate(_prompts(5, 0), params)]
    pool_bytes = sum(a.nbytes for a in jax.tree.leaves((eng._pool.k, eng._pool.v)))
    weight_bytes = sum(a.nbytes for a in jax.tree.leaves(eng._params))
    before = _live_bytes()
    freed = eng.sleep()
    assert eng.asleep and freed >= pool_bytes + weight_bytes
    assert before - _live_bytes() >= pool_bytes + weight_bytes - 64 * 1024  # fresh slots are small
    assert eng.sleep(weights=False) == 0  # asleep already
    with pytest.raises(RuntimeError, match="update_weights"):
        eng.generate(_prompts(1, 1), params[:1])
    eng.abort()
    eng.update_weights(model)
    second = eng.generate(_prompts(5, 2), params)
    assert not eng.asleep and eng.stats["sleeps"] == 1
    ref.generate(_prompts(1, 1), params[:1])  # request ids advance alike in both engines
    want = ref.generate(_prompts(5, 2), params)
    assert [c.token_ids for c in second] == [c.token_ids for c in want]
    np.testing.assert_allclose(np.concatenate([c.logprobs for c in second]),
                               np.concatenate([c.logprobs for c in want]), rtol=0, atol=1e-6)


def test_sleep_refused_while_pages_are_in_use(model):
    eng = Engine(model, EngineConfig(**CFG))
    rid = eng.submit(_prompts(1, 0)[0], SamplingParams(max_tokens=4))
    with pytest.raises(RuntimeError, match="unfinished requests"):
        eng.sleep()
    done = []
    while not done:
        done = eng.step()
    assert done[0].request_id == rid
    rid = eng.submit(_prompts(1, 3)[0], SamplingParams(max_tokens=4), retain=True)
    comp = []
    while not comp:
        comp = eng.step()
    with pytest.raises(RuntimeError, match="retained pages"):
        eng.sleep()
    eng.release(comp[0])
    assert eng.sleep(weights=False) > 0
    # weights kept: the next call wakes with an empty pool, every page free again
    out = eng.generate(_prompts(2, 4), SamplingParams(max_tokens=4))
    assert len(out) == 2 and int(eng._pool.n_free) == eng.num_pages - 1


def test_sleep_drops_requests_aborted_on_the_device(model):
    eng = Engine(model, EngineConfig(**CFG))
    rids = [eng.submit(p, SamplingParams(max_tokens=40, seed=1)) for p in _prompts(3, 5)]
    eng.step(max_rounds=2)  # on the device now
    eng.abort(rids)
    assert eng.num_unfinished == 0
    eng.sleep(weights=False)
    out = eng.generate(_prompts(2, 6), SamplingParams(max_tokens=6, seed=2))
    assert [len(c.token_ids) for c in out] == [6, 6]
    assert int(eng._pool.n_free) == eng.num_pages - 1 and not eng.book.aborted


def test_kv_cache_gib():
    model = init_model(presets.get("tiny"), seed=0)
    a = Engine(model, EngineConfig(**CFG, kv=KVCacheOptions(kv_cache_gib=1 / 1024)))
    b = Engine(model, EngineConfig(**CFG, kv=KVCacheOptions(kv_cache_bytes=1 << 20)))
    assert a.num_pages == b.num_pages > 0
    with pytest.raises(ValueError, match="not both"):
        EngineConfig(**CFG, kv=KVCacheOptions(kv_cache_gib=1.0, kv_cache_bytes=1 << 20))
    with pytest.raises(ValueError, match="kv_cache_gib must be a positive number"):
        EngineConfig(**CFG, kv=KVCacheOptions(kv_cache_gib=-1.0))
