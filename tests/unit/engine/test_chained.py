"""memjax.engine chained turns: step(idle_return=n) returns once a turn finished and n slots idle, so the
host submits follow-ups at once: same tokens, fewer idle slot-rounds."""

import numpy as np
import pytest

from benchmarks.chained_turns import run_chained
from memjax.engine import Engine, EngineConfig, SamplingParams
from memjax.model import init_model, presets


def _chain(eng, turns, idle_return, max_rounds=None):
    r = run_chained(eng, turns, idle_return, max_rounds)  # the benchmark's own driver
    return r["tokens"], r["utilisation"], r["syncs"]


# every-round syncs needed per early-return sync: mixed rounds decode while a follow-up turn prefills, so
# a turn takes fewer rounds and the every-round baseline has fewer syncs to beat (31 vs 11 calls here)
@pytest.mark.parametrize("schedule,sync_ratio", [("split", 3), ("mixed", 2.5)])
def test_idle_return_keeps_tokens_and_raises_utilisation(schedule, sync_ratio):
    eng = Engine(init_model(presets.get("tiny"), seed=7),
                 EngineConfig(max_slots=4, page_size=4, window=64, prefill_slots=2, prefill_chunk=8,
                              rounds_per_sync=32, progress=False, schedule=schedule))
    r = np.random.default_rng(0)
    turns = [[(r.integers(0, 512, 6).tolist(), SamplingParams(temperature=1.0, seed=10 * c + k,
                                                               max_tokens=int(r.integers(2, 16))))
              for k in range(3)] for c in range(4)]
    off, u_off, calls_off = _chain(eng, turns, 0)
    on, u_on, calls_on = _chain(eng, turns, 1)
    every, u_every, calls_every = _chain(eng, turns, 0, max_rounds=1)  # the best any sync policy can do
    assert on == off == every and len(on) == 12
    # early return reaches the every-round utilisation with a fraction of its host syncs
    assert u_on >= u_every - 1e-9 and u_on > u_off + 0.04, (u_on, u_every, u_off)
    assert calls_off < calls_on < calls_every / sync_ratio, (calls_off, calls_on, calls_every)
    with pytest.raises(ValueError, match="EngineConfig.idle_return"):
        EngineConfig(max_slots=4, idle_return=5)
