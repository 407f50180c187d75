"""memjax.engine token-budget rounds (EngineConfig.schedule="mixed"): the round plan against a plain-Python
reference, token-for-token parity with the split schedule (greedy, sampled, top-p/top-k, processed
log-probs, prefix sharing, preemption), and decoding never paused by a pending prefill."""

import jax.numpy as jnp
import numpy as np
import pytest

from memjax.engine import Engine, EngineConfig, KVCacheOptions, KernelOptions, SamplingParams
from memjax.engine.mixed import plan_round
from memjax.engine.state import init_slots
from memjax.model import init_model, presets
from tests.engine_shapes import SMALL as CFG  # the loop other modules compile too



@pytest.fixture(scope="module")
def model():
    return init_model(presets.get("tiny"), seed=3)


@pytest.fixture(scope="module")
def engines(model):  # small pool: the mixed and split runs below both preempt
    return {s: Engine(model, EngineConfig(**CFG, schedule=s, token_budget=12, kv=KVCacheOptions(num_pages=22)))
            for s in ("split", "mixed")}


def _plan_ref(active, prompt_len, seq_len, n_gen, order, n_rows):
    """Plain-Python round plan: decoding slots one token each, then prefilling ones by admission order."""
    dec = sorted((order[i], i) for i in range(len(active)) if active[i] and seq_len[i] >= prompt_len[i])
    pre = sorted((order[i], i) for i in range(len(active)) if active[i] and seq_len[i] < prompt_len[i])
    rows, take = [], [0] * len(active)
    for _, i in dec + pre:
        for p in range(seq_len[i], prompt_len[i] + n_gen[i]):
            if len(rows) < n_rows:
                rows.append((i, p))
                take[i] += 1
    return take, rows


@pytest.mark.parametrize("n_rows", [5, 16, 40])
def test_plan_round_matches_python_reference(n_rows):
    f = dict(active=[True, True, False, True, True], prompt_len=[10, 30, 0, 9, 5], seq_len=[12, 4, 0, 0, 5],
             n_gen=[3, 0, 0, 0, 1], order=[5, 2, 0, 1, 7])
    s = init_slots(EngineConfig(**{**CFG, "max_slots": 5}))
    s = s.replace(**{k: jnp.asarray(v) for k, v in f.items()})
    plan = plan_round(s, n_rows)
    take, rows = _plan_ref(**f, n_rows=n_rows)
    assert np.asarray(plan.take).tolist() == take
    n = len(rows)
    assert np.asarray(plan.valid).tolist() == [True] * n + [False] * (n_rows - n)
    got = list(zip(np.asarray(plan.slot)[:n].tolist(), np.asarray(plan.pos)[:n].tolist()))
    assert got == rows
    for i in range(5):  # each slot's rows are contiguous from row_start
        if take[i]:
            assert [r for r, (j, _) in enumerate(rows) if j == i][0] == int(plan.row_start[i])


def _workload(seed=0):
    r = np.random.default_rng(seed)
    prompts = [r.integers(0, 512, int(k)).tolist() for k in r.integers(1, 45, 9)]
    prompts += [prompts[2]] * 3  # a prefix-sharing group
    params = [SamplingParams(temperature=0.0 if i % 3 == 0 else 0.8, top_p=0.9 if i % 3 == 1 else 1.0,
                             top_k=20 if i % 3 == 2 else 0, logprobs="processed" if i % 2 else "raw",
                             max_tokens=int(r.integers(4, 18)), seed=i) for i in range(len(prompts))]
    return prompts, params


def test_mixed_equals_split_with_sharing_and_preemption(engines):
    prompts, params = _workload()
    out = {s: e.generate(prompts, params) for s, e in engines.items()}
    for a, b in zip(out["split"], out["mixed"]):
        assert a.token_ids == b.token_ids and a.finish_reason == b.finish_reason
        np.testing.assert_allclose(a.logprobs, b.logprobs, atol=1e-6)
    mixed = engines["mixed"]
    assert mixed.stats["preemptions"] > 0 and mixed.stats["shared_pages"] > 0
    assert int(mixed._pool.n_free) == mixed.num_pages - 1 and int(mixed._pool.refcount.sum()) == 0


def test_decoding_never_paused_by_a_pending_prefill(engines):
    long = list(range(1, 50))  # 49 prompt tokens: several rounds of prefill under a 12-token budget
    stalls = {}
    for sched, eng in engines.items():
        dec = eng.submit([5, 6, 7], SamplingParams(temperature=0.0, max_tokens=40))
        while int(eng._slots.n_gen.max()) < 2:
            eng.step(max_rounds=1)
        eng.submit(long, SamplingParams(temperature=0.0, max_tokens=2))
        slot = int(np.argmax(np.asarray(eng._slots.req) == dec))
        stalls[sched], prefill_rounds = 0, 0
        while True:
            before = int(eng._slots.n_gen[slot])
            eng.step(max_rounds=1)
            s = eng._slots
            pending = bool((np.asarray(s.active) & (np.asarray(s.seq_len) < np.asarray(s.prompt_len))).any())
            stalls[sched] += int(s.n_gen[slot]) == before
            prefill_rounds += 1
            if not pending:
                break
        assert prefill_rounds >= 4
        while eng.num_unfinished:
            eng.step()
    assert stalls["mixed"] == 0 and stalls["split"] >= 4


def test_schedule_config_errors():
    with pytest.raises(ValueError, match="schedule must be one of"):
        EngineConfig(**CFG, schedule="chunked")
    with pytest.raises(ValueError, match="token_budget=3 must be 0 .auto. or an int >= max_slots=4"):
        EngineConfig(**CFG, token_budget=3)
    assert EngineConfig(**CFG).round_tokens == 4 + 2 * 8 and EngineConfig(**CFG, token_budget=9).round_tokens == 9
    assert EngineConfig(**CFG).round_sizes == (4, 20) and EngineConfig(**CFG, token_budget=4).round_sizes == (4,)
    big = EngineConfig(max_slots=16, prefill_slots=4, prefill_chunk=64, window=512)
    assert big.round_sizes == (4, 16, 34, 272)
    assert EngineConfig(max_slots=16, prefill_slots=4, prefill_chunk=64, window=512,
                        kernels=KernelOptions(small_rounds=0)).round_sizes \
        == (16, 34, 272)
    memagent = EngineConfig(max_slots=256, page_size=64, window=8192, prefill_slots=16, prefill_chunk=2048)
    assert memagent.round_tokens == 256 + 8192 and memagent.round_sizes == (16, 64, 256, 1056, 8448)
    assert EngineConfig(max_slots=256, kernels=KernelOptions(small_rounds=1)).round_sizes[:2] == (64, 256)
    with pytest.raises(ValueError, match="small_rounds must be an int >= 0"):
        EngineConfig(**CFG, kernels=KernelOptions(small_rounds=-1))


def test_small_rounds_sample_the_same_tokens(model):
    """A skewed batch on 16 slots: its tail (<= 4 live sequences) runs in the 4-row bucket, LM head and sampler
    on 4 rows; tokens and log-probs equal the run without small buckets (whose equality with the split schedule
    is checked above)."""
    r = np.random.default_rng(7)
    prompts = [r.integers(0, 512, int(k)).tolist() for k in r.integers(2, 20, 14)]
    params = [SamplingParams(temperature=0.0 if i % 2 else 0.9, top_k=30 if i % 3 == 0 else 0,
                             max_tokens=24 if i >= 11 else 3, seed=i) for i in range(len(prompts))]  # long: last slots
    base = dict(max_slots=16, page_size=4, window=64, prefill_slots=4, prefill_chunk=8, progress=False)
    runs = {}
    kinds = {"small": dict(schedule="mixed"), "none": dict(schedule="mixed", kernels=KernelOptions(small_rounds=0))}
    for name, kw in kinds.items():
        eng = Engine(model, EngineConfig(**base, **kw))
        runs[name] = eng.generate(prompts, params)
    assert EngineConfig(**base, schedule="mixed").round_sizes[0] == 4
    for a, b in zip(runs["small"], runs["none"]):
        assert a.token_ids == b.token_ids and a.finish_reason == b.finish_reason
        np.testing.assert_allclose(a.logprobs, b.logprobs, atol=1e-6)


def test_continuation_with_idle_return_equals_split(engines):
    """A retained turn continued by a sampled child (step(idle_return=1)): same tokens under both schedules."""
    prompt = np.random.default_rng(5).integers(0, 512, 19).tolist()
    out = {}
    for sched, eng in engines.items():
        done = {}
        rid = eng.submit(prompt, SamplingParams(temperature=0.0, max_tokens=6), retain=True)
        while rid not in done:
            done.update({c.request_id: c for c in eng.step(idle_return=1)})
        kid = eng.submit([3, 1, 4], SamplingParams(temperature=1.0, max_tokens=9, seed=7), parent=done[rid])
        eng.release(done[rid])
        while kid not in done:
            done.update({c.request_id: c for c in eng.step(idle_return=1)})
        out[sched] = (done[rid], done[kid])
        assert eng.stats["continued_tokens"] > 0 and eng.retained_pages == 0
    for a, b in zip(out["split"], out["mixed"]):
        assert a.token_ids == b.token_ids
        np.testing.assert_allclose(a.logprobs, b.logprobs, atol=1e-6)


@pytest.mark.slow(seconds=60)
def test_ragged_pallas_back_end_equals_the_per_row_reference(model, engines):
    """attention="pallas" (interpret mode on CPU): the mixed round's attention runs as the ragged kernel
    (memjax/kernels/ragged_paged_attention.py: each sequence's rows in blocks reading its pages once) and returns
    the per-row reference engine's tokens and log-probs, through preemption and prefix sharing."""
    from memjax.engine.paged_kv import PagedAttention
    from memjax.kernels import engine_attend

    calls = []
    orig = PagedAttention.__call__

    def spy(self, q, k, v, *, layer, state):
        calls.append(self.ragged is not None and getattr(self.attend, "ragged", None) is not None)
        return orig(self, q, k, v, layer=layer, state=state)

    assert getattr(engine_attend(impl="reference"), "ragged", None) is None
    prompts, params = _workload()
    ref = engines["mixed"].generate(prompts, params)
    PagedAttention.__call__ = spy
    try:
        eng = Engine(model, EngineConfig(**CFG, schedule="mixed", token_budget=12, kv=KVCacheOptions(num_pages=22),
                                         kernels=KernelOptions(attention="pallas")))
        got = eng.generate(prompts, params)
    finally:
        PagedAttention.__call__ = orig
    assert calls and all(calls)  # traced: every mixed forward took the ragged path
    for a, b in zip(ref, got):
        assert a.token_ids == b.token_ids and a.finish_reason == b.finish_reason
        np.testing.assert_allclose(a.logprobs, b.logprobs, atol=1e-5)
    assert eng.stats["preemptions"] > 0 and eng.stats["shared_pages"] > 0


def test_round_rows_match_the_padding_model(engines):
    """benchmarks.gpu_aot_rounds.mixed_padding (the model BUILD.md's padding figures come from) counts the rows the
    engine's mixed rounds run: prompts admitted at once, max_tokens 1 (no decode rows)."""
    from benchmarks.gpu_aot_rounds import mixed_padding

    eng = engines["mixed"]
    lens = [5, 17, 9, 2]
    r = np.random.default_rng(7)
    before = dict(eng.stats)
    eng.generate([r.integers(0, 512, n).tolist() for n in lens], SamplingParams(temperature=0.0, max_tokens=1))
    delta = {k: eng.stats[k] - before.get(k, 0) for k in ("prefill_tokens", "prefill_executed", "prefill_rounds")}
    model = mixed_padding(lens, eng.config)
    assert delta == {"prefill_tokens": model["useful_tokens"], "prefill_executed": model["executed_tokens"],
                     "prefill_rounds": model["rounds"]}, (delta, model)
