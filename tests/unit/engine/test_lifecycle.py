"""memjax.engine over a long run: released slots are reset, per-call counters, id wrap-around, order rebase."""

import jax.numpy as jnp
import numpy as np
import pytest

from memjax.engine import Engine, EngineConfig, SamplingParams
from memjax.engine.scheduler import rebase_order
from memjax.engine.state import init_slots
from memjax.model import init_model, presets
from tests.engine_shapes import SMALL as CFG  # the loop other modules compile too


@pytest.fixture(scope="module")
def engine():
    return Engine(init_model(presets.get("tiny"), seed=5), EngineConfig(**CFG))


def _prompts(n, seed):
    r = np.random.default_rng(seed)
    return [r.integers(0, 512, int(k)).tolist() for k in r.integers(3, 30, n)]


def test_released_slots_are_reset_while_others_run(engine):
    long = engine.submit(_prompts(1, 0)[0], SamplingParams(temperature=0.0, max_tokens=40))
    short = engine.submit(_prompts(1, 1)[0], SamplingParams(temperature=0.0, max_tokens=2))
    done = []
    while short not in [c.request_id for c in done]:
        done += engine.step(max_rounds=2)
    s = engine._slots
    free = ~np.asarray(s.active)
    assert free.sum() == 3 and engine.num_unfinished == 1
    for f, v in (("seq_len", 0), ("prompt_len", 0), ("n_gen", 0), ("n_pages", 0), ("finish", -1), ("req", -1),
                 ("group", -1)):
        assert (np.asarray(getattr(s, f))[free] == v).all(), f
    assert (np.asarray(s.page_table)[free] == 0).all()
    while engine.num_unfinished:
        done += engine.step()
    assert {c.request_id for c in done} == {long, short}
    assert not np.asarray(engine._slots.seq_len).any()


def test_stats_are_sums_of_per_call_counters(engine):
    prompts = _prompts(9, 2)
    before = dict(engine.stats)
    outs = engine.generate(prompts, SamplingParams(temperature=0.0, max_tokens=5))
    d = {k: engine.stats[k] - before.get(k, 0) for k in ("prefill_tokens", "decode_tokens")}
    # every prompt token is prefilled once; each sequence's first token comes from prefill
    assert d["prefill_tokens"] == sum(map(len, prompts))
    assert d["decode_tokens"] == sum(len(o.token_ids) - 1 for o in outs)


def test_request_and_group_ids_wrap_below_int32(engine):
    prompts = _prompts(3, 3)
    params = [SamplingParams(temperature=1.0, max_tokens=6, seed=i) for i in range(6)]
    ref = engine.generate(prompts + prompts, params)
    engine.book.next_id = {"req": 2**31 - 4, "group": 2**31 - 3}
    out = engine.generate(prompts + prompts, params)  # groups of 2 identical prompts share pages
    assert [o.request_id for o in out] == [2**31 - 4, 2**31 - 3, 2**31 - 2, 0, 1, 2]
    assert [o.token_ids for o in out] == [o.token_ids for o in ref]
    assert engine.book.next_id["group"] == 1 and not engine.book.live_gids


def test_rebase_order_keeps_lifo_rank_bounded():
    s = init_slots(EngineConfig(**CFG))
    s = s.replace(active=jnp.asarray([True, False, True, True]), order=jnp.asarray([2**31 - 9, 77, 5, 2**30]))
    r = rebase_order(s)
    assert np.asarray(r.order).tolist() == [-2, 0, -4, -3]  # running slots: rank - B; free: 0
