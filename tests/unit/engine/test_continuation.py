"""memjax.engine multi-turn continuation: submit(new, parent=completion) over retained KV pages equals
prefilling the whole concatenation, saves the history's prefill, and gives every page back."""

import numpy as np
import pytest

from memjax.engine import Engine, EngineConfig, SamplingParams
from memjax.model import init_model, presets
from tests.engine_shapes import SMALL as CFG  # the loop other modules compile too


@pytest.fixture(scope="module")
def engine():
    return Engine(init_model(presets.get("tiny"), seed=6), EngineConfig(**CFG))


def _run(eng, rid):
    while True:
        for c in eng.step():
            if c.request_id == rid:
                return c


def test_three_turn_continuation_equals_reprefill_and_saves_prefill(engine):
    r = np.random.default_rng(0)
    turns = [r.integers(0, 512, int(k)).tolist() for k in (13, 6, 9)]
    greedy = SamplingParams(temperature=0.0, max_tokens=7)
    history, parent, saved = [], None, 0
    for i, new in enumerate(turns):
        before = dict(engine.stats)
        c = _run(engine, engine.submit(new, greedy, parent=parent, retain=True))
        d = {k: engine.stats[k] - before.get(k, 0) for k in ("prefill_tokens", "continued_tokens")}
        if parent is not None:
            engine.release(parent)
        # reference: the whole conversation so far as one fresh prompt (no retained pages)
        ref = engine.generate([history + new], greedy)[0]
        assert c.token_ids == ref.token_ids and c.prompt_len == len(history) + len(new)
        np.testing.assert_allclose(c.logprobs, ref.logprobs, atol=1e-5)
        cached = (len(history) - 1) // 4 if history else 0  # parent's full pages (its newest token uncached)
        assert d["continued_tokens"] == 4 * cached and d["prefill_tokens"] == len(history) + len(new) - 4 * cached
        saved += d["continued_tokens"]
        history = history + new + c.token_ids
        assert c.kv.tokens == history and c.kv.n_cached == len(history) - 1
        parent = c
    engine.release(parent)
    engine.release(parent)  # idempotent
    assert saved == 4 * ((13 + 7 - 1) // 4 + (13 + 7 + 6 + 7 - 1) // 4)
    assert engine.retained_pages == 0 and int(engine._pool.n_free) == engine.num_pages - 1
    assert int(engine._pool.refcount.sum()) == 0


def test_forked_sampled_children_and_early_parent_release(engine):
    """Two sampled children of one parent, the parent released before they are admitted: each child
    equals a fresh request on the concatenation with its seed; all pages come back."""
    p = np.random.default_rng(1).integers(0, 512, 21).tolist()
    parent = engine.generate([p], SamplingParams(temperature=0.0, max_tokens=5))[0]
    assert parent.kv is None  # nothing retained by default
    rid = engine.submit(p, SamplingParams(temperature=0.0, max_tokens=5), retain=True)
    parent = _run(engine, rid)
    kids = [SamplingParams(temperature=1.0, max_tokens=9, seed=40 + i) for i in range(2)]
    new = [[7, 8, 9], [7, 8, 9]]
    rids = [engine.submit(n, sp, parent=parent) for n, sp in zip(new, kids)]
    engine.release(parent)  # deferred: the queued children still need its pages
    assert engine.retained_pages == len(parent.kv.pages) and not parent.kv.freed
    outs = {}
    while engine.num_unfinished:
        outs.update({c.request_id: c for c in engine.step()})
    assert parent.kv.freed and engine.retained_pages == 0
    refs = engine.generate([p + parent.token_ids + n for n in new], kids)
    for r, ref in zip(rids, refs):
        assert outs[r].token_ids == ref.token_ids
        np.testing.assert_allclose(outs[r].logprobs, ref.logprobs, atol=1e-5)
    assert outs[rids[0]].token_ids != outs[rids[1]].token_ids
    assert int(engine._pool.n_free) == engine.num_pages - 1
    with pytest.raises(ValueError, match="no retained KV pages"):
        engine.submit([1], parent=parent)
