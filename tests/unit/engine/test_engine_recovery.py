"""Engine recovery (issue 23, item 7): a rejected `generate` queues nothing, `abort` leaves no orphan
requests after an exception inside a workflow, and non-integer token ids are refused, not truncated."""

import numpy as np
import pytest

from memjax import load_hf
from memjax.engine import Engine, EngineConfig, SamplingParams

from conftest import golden_dir
from tests.engine_shapes import SMALL as CFG  # the loop other modules compile too

SP = SamplingParams(temperature=0.0, max_tokens=6)


@pytest.fixture(scope="module")
def eng():  # one engine (one compilation) through every fault below: it must stay usable
    return Engine(load_hf(golden_dir("untied_kv2")), EngineConfig(**CFG))


@pytest.fixture(scope="module")
def ref(eng):  # greedy outputs of a clean engine, taken before any fault
    return {tuple(p): c.token_ids for p, c in zip(_prompts(8, seed=2), eng.generate(_prompts(8, seed=2), SP))}


def _prompts(n, seed=0):
    r = np.random.default_rng(seed)
    return [r.integers(0, 500, int(k)).tolist() for k in r.integers(3, 20, n)]


def test_rejected_generate_queues_nothing(eng, ref):
    good = _prompts(8, seed=2)
    with pytest.raises(ValueError, match="no room"):
        eng.generate([good[0], list(range(1, 70))], SP)
    assert eng.num_unfinished == 0
    out = eng.generate([good[1]], SP)  # `good[0]` must not come back here or leak into the next call
    assert len(out) == 1 and out[0].token_ids == ref[tuple(good[1])]


def test_abort_after_exception_inside_a_workflow(eng, ref):
    inflight = {eng.submit(p, SP): p for p in _prompts(6, seed=1)}
    try:  # a workflow that dies after its first device call, with requests queued and running
        eng.step(max_rounds=1)
        raise RuntimeError("workflow bug")
    except RuntimeError:
        assert eng.abort() == len(inflight) or eng.num_unfinished == 0
    assert eng.num_unfinished == 0
    prompts = _prompts(8, seed=2)
    got = eng.generate(prompts, SP)  # no KeyError, no stray completions, same outputs as a clean engine
    assert [c.token_ids for c in got] == [ref[tuple(p)] for p in prompts]
    # streaming callers see only their own completions after an abort of some requests
    a, b = eng.submit(prompts[0], SP), eng.submit(prompts[1], SP)
    assert eng.abort([a]) == 1
    seen = []
    while eng.num_unfinished:
        seen += [c.request_id for c in eng.step()]
    assert seen == [b]


def test_interrupted_generate_aborts_its_requests(eng, monkeypatch):
    calls = {"n": 0}
    real = eng.step

    def flaky(*a, **k):
        calls["n"] += 1
        if calls["n"] == 1:
            raise KeyboardInterrupt
        return real(*a, **k)

    monkeypatch.setattr(eng, "step", flaky)
    with pytest.raises(KeyboardInterrupt):
        eng.generate(_prompts(6, seed=3), SP)
    assert eng.num_unfinished == 0
    monkeypatch.setattr(eng, "step", real)
    assert len(eng.generate(_prompts(2, seed=4), SP)) == 2


def test_float_token_ids_are_refused(eng):
    with pytest.raises(ValueError, match="must be integers, got 3.7"):
        eng.generate([[1, 2], [1, 3.7]], SP)
    with pytest.raises(ValueError, match="must be integers"):
        eng.submit([True, 2])
    assert eng.num_unfinished == 0
    assert len(eng.generate([np.array([1, 2, 3], np.int64)], SP)) == 1


def test_aborted_retained_request_and_continuation_give_their_pages_back(eng, ref):
    """A retained request aborted while on the device, and a continuation aborted before admission:
    once the device has drained, every page is free again (no KVHandle will ever release them)."""
    free0 = int(eng._pool.n_free)
    rid = eng.submit(list(range(1, 20)), SamplingParams(temperature=0.0, max_tokens=12), retain=True)
    eng.step(max_rounds=1)
    eng.abort([rid])
    r2 = eng.submit(list(range(1, 20)), SamplingParams(temperature=0.0, max_tokens=3), retain=True)
    parent = []
    while not parent:
        parent = eng.step()
    child = eng.submit([5, 6], SP, parent=parent[0])
    eng.release(parent[0])
    eng.abort([child])
    assert r2 != rid and eng.retained_pages == 0
    eng.generate([list(range(1, 5))], SamplingParams(temperature=0.0, max_tokens=30))  # drains the aborted one
    assert int(eng._pool.n_free) == free0 and eng.num_unfinished == 0
    good = _prompts(8, seed=2)[3]
    assert eng.generate([good], SP)[0].token_ids == ref[tuple(good)]
