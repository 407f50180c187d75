"""The generation loop's branch decisions per round (memjax/engine/loop.py): on XLA:GPU each `lax.cond` /
`lax.switch` and each while loop without a trip count reads its predicate back to the host, so the loop makes as
few as it can: 3 per round in both schedules (8 before 2026-12-02), counted in the loop's jaxpr with the Pallas
attention the engine uses on a GPU (a kernel's own loops run on the device and are not counted). The merged end
of a round, `release_and_admit`, equals releasing the finished slots and then `admit`, on states taken from a real
run with prefix sharing and preemption."""

from functools import partial

import jax
import jax.extend
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from memjax.engine import Engine, EngineConfig, KVCacheOptions, KernelOptions, SamplingParams
from memjax.engine.config import FINISH_LENGTH
from memjax.engine.loop import make_loop
from memjax.engine.live_request import pack_queue
from memjax.engine.sampler import Truncation, sample
from memjax.engine.scheduler import admit, release, release_and_admit
from memjax.engine.state import init_pool, init_ring, init_slots
from memjax.kernels import engine_attend
from memjax.model import init_model, presets
from tests.engine_shapes import SMALL


def size(jaxpr) -> int:
    """Equations, sub-jaxprs included."""
    return sum(1 + sum(size(sub) for sub in jax.extend.core.jaxprs_in_params(e.params)) for e in jaxpr.eqns)


def decisions(jaxpr) -> int:
    """Host round trips of one execution: a cond is one plus its largest branch's (a round's forward, not the
    preemption round that runs only when the pool is short; benchmarks/hlo_facts.py also takes the largest), a
    while loop without a trip count one per iteration (counted once) plus its body's, a scan its body's times its
    length; the equations inside a kernel (pallas_call) run on the device."""
    n = 0
    for eqn in jaxpr.eqns:
        name = eqn.primitive.name
        if name == "pallas_call":
            continue
        if name == "cond":
            n += 1 + decisions(max((b.jaxpr for b in eqn.params["branches"]), key=size))
        elif name == "while":
            n += 1 + decisions(eqn.params["body_jaxpr"].jaxpr) + decisions(eqn.params["cond_jaxpr"].jaxpr)
        elif name == "scan":
            n += eqn.params["length"] * decisions(eqn.params["jaxpr"].jaxpr)
        else:
            n += sum(decisions(sub) for sub in jax.extend.core.jaxprs_in_params(eqn.params))
    return n


@pytest.mark.parametrize("truncate", [False, True, None])
@pytest.mark.parametrize("schedule", ["split", "mixed"])
def test_three_branch_decisions_per_round(schedule, truncate):
    """Per round: the loop's predicate, the round's kind (split: idle / prefill / decode / preemption; mixed: its row
    size or preemption), and release + admit. The engine compiles the sampler without a branch (truncate False or
    True, decided per call by the host); truncate=None (the sampler decides per round) adds one."""
    cfg = presets.get("tiny")
    model = nnx.eval_shape(lambda: init_model(cfg, 0))
    ecfg = EngineConfig(max_slots=4, window=64, page_size=16, prefill_slots=2, prefill_chunk=32, schedule=schedule,
                        progress=False, kv=KVCacheOptions(num_pages=20), kernels=KernelOptions(attention="pallas"))
    run = make_loop(nnx.graphdef(model), cfg, ecfg, attend=engine_attend(impl="pallas", num_splits=2),
                    truncate=truncate)
    queue = jax.tree.map(lambda a: a[0], pack_queue([[]], ecfg, ecfg.queue_len))
    jaxpr = jax.make_jaxpr(run)(nnx.state(model, nnx.Param), init_slots(ecfg), init_pool(cfg, ecfg, 20), queue,
                                init_ring(ecfg), jnp.int32(4), jnp.int32(0)).jaxpr
    loops = [e for e in jaxpr.eqns if e.primitive.name == "while"]
    assert len(loops) == 1  # the rounds; before it, the call's first admission (one decision per call)
    per_round = 3 + (truncate is None)
    body = loops[0].params["body_jaxpr"].jaxpr
    assert decisions(body) + 1 == per_round
    assert decisions(jaxpr) == per_round + 1
    # the round's kind: one switch, whose last branch is the preemption round, with its loop
    kinds = max((e for e in body.eqns if e.primitive.name == "cond"), key=lambda e: len(e.params["branches"]))
    assert len(kinds.params["branches"]) == (4 if schedule == "split" else len(ecfg.round_sizes) + 1)
    preempt = kinds.params["branches"][-1].jaxpr
    assert [e.primitive.name for e in preempt.eqns].count("while") == 1 and decisions(preempt) == 1


@pytest.mark.parametrize("truncate,branches", [(None, 1), (True, 0), (False, 0)])
def test_sampler_branches(truncate, branches):
    b, v = 3, 40
    jaxpr = jax.make_jaxpr(partial(sample, truncate=truncate))(
        jnp.zeros((b, v)), jnp.ones(b), jnp.ones(b), jnp.zeros(b, jnp.int32), jnp.zeros(b, jnp.int32),
        jnp.zeros(b, jnp.int32), jnp.zeros(b, bool)).jaxpr
    assert decisions(jaxpr) == branches


def test_static_truncation_samples_as_the_device_decision():
    """truncate=True on rows of which some have a top-p or top-k gives what the per-round decision gives, and so does
    truncate=False on rows with neither (tokens equal, log-probs to f32 rounding): the engine's choice per call
    changes no output; nor does a GPU's 15-way search in place of the CPU's bisection."""
    rng = np.random.default_rng(0)
    b, v = 8, 1000
    logits = jnp.asarray(rng.normal(size=(b, v)) * 3, jnp.float32)
    temp = jnp.asarray([1.0, 0.7, 0.0, 1.3, 1.0, 0.5, 1.0, 2.0], jnp.float32)
    seeds, pos = jnp.arange(b, dtype=jnp.int32), jnp.full(b, 5, jnp.int32)
    proc = jnp.asarray([True, False] * 4)
    top_p = jnp.asarray([1.0, 0.9, 0.5, 1.0, 0.3, 1.0, 1.0, 0.95], jnp.float32)
    top_k = jnp.asarray([0, 0, 0, 20, 0, 0, 5, 0], jnp.int32)
    for p, k, static in ((top_p, top_k, True), (jnp.ones(b), jnp.zeros(b, jnp.int32), False),
                         (jnp.ones(b), jnp.zeros(b, jnp.int32), True),
                         (top_p, top_k, Truncation(ways=15))):  # a GPU's search: the same thresholds, the same tokens
        tok, lp = sample(logits, temp, p, k, seeds, pos, proc, truncate=None)
        tok_s, lp_s = sample(logits, temp, p, k, seeds, pos, proc, truncate=static)
        np.testing.assert_array_equal(tok_s, tok)
        np.testing.assert_allclose(lp_s, lp, rtol=0, atol=1e-6)


def test_engine_compiles_the_truncating_loop_only_when_a_request_needs_it():
    eng = Engine(init_model(presets.get("tiny"), seed=2), EngineConfig(**SMALL))  # tests/engine_shapes.py
    rng = np.random.default_rng(0)
    prompts = [rng.integers(0, 512, n).tolist() for n in (5, 9)]
    plain = eng.generate(prompts, SamplingParams(temperature=1.0, max_tokens=6, seed=1))
    greedy_top_p = eng.generate(prompts, SamplingParams(temperature=0.0, top_p=0.5, max_tokens=6))
    assert eng._runs_truncating == {}  # neither sampled with a top-p or top-k (greedy ignores them)
    nucleus = eng.generate(prompts, SamplingParams(temperature=1.0, top_p=0.2, max_tokens=6, seed=1))
    assert list(eng._runs_truncating) == [Truncation(top_k=False, top_p=True)]  # no top-k search compiled in
    both = eng.generate(prompts, [SamplingParams(temperature=1.0, top_p=0.2, max_tokens=6, seed=1),
                                  SamplingParams(temperature=1.0, top_k=3, max_tokens=6, seed=1)])
    assert list(eng._runs_truncating) == [Truncation(top_k=False, top_p=True), Truncation()]
    assert all(run._cache_size() == 1 for run in (eng._run, *eng._runs_truncating.values()))
    assert [c.token_ids for c in plain] != [c.token_ids for c in nucleus]  # the nucleus changed the samples
    assert both[0].token_ids == nucleus[0].token_ids  # the top-k search leaves a row without a top-k as it was
    assert all(len(c.token_ids) == 6 for c in plain + greedy_top_p + nucleus + both)


@pytest.fixture(scope="module")
def states():
    """(slots, pool, queue, ring) after each of the first rounds of a run whose 12 requests (3 prompts x 4, so
    groups share their prompt pages) do not all fit in 4 slots and a 10-page pool: admissions wait, pages run out."""
    ecfg = EngineConfig(max_slots=4, window=32, page_size=4, prefill_slots=2, prefill_chunk=8, schedule="split",
                        progress=False, rounds_per_sync=1, kv=KVCacheOptions(num_pages=10))
    eng = Engine(init_model(presets.get("tiny"), seed=3), ecfg)
    rng = np.random.default_rng(0)
    for n in (9, 14, 6):
        prompt = rng.integers(0, 512, n).tolist()
        for _ in range(4):
            eng.submit(prompt, SamplingParams(temperature=1.0, max_tokens=int(rng.integers(8, 18))))
    out = []
    for _ in range(20):
        queue, _ = eng._queue()
        out.append(jax.tree.map(jnp.array, (eng._slots, eng._pool, queue, eng._ring)))
        eng.step(max_rounds=1)
    assert eng.stats["shared_pages"] > 0 and eng.stats["preemptions"] > 0
    return ecfg, out


def test_release_and_admit_equals_release_then_admit(states):
    ecfg, seen = states
    rng = np.random.default_rng(1)
    merged = jax.jit(lambda s, p, q, r, base: release_and_admit(s, p, q, r, base, ecfg.page_size))

    @jax.jit
    def apart(slots, pool, queue, ring, base):
        done = slots.active & (slots.finish >= 0)
        slots, pool, ring = release(slots, pool, ring, done, slots.finish)
        slots, pool, queue, counts = admit(slots, pool, queue, base, ecfg.page_size)
        return slots, pool, queue, ring, counts

    kinds = set()
    for slots, pool, queue, ring in seen:
        for finish_some in (False, True):  # as after a round: nothing or some running slots finished
            hit = jnp.asarray(rng.random(slots.active.shape[0]) < 0.5) & slots.active & finish_some
            s = slots.replace(finish=jnp.where(hit, FINISH_LENGTH, slots.finish))
            base = jnp.int32(7 * s.active.shape[0])
            got, want = merged(s, pool, queue, ring, base), apart(s, pool, queue, ring, base)
            jax.tree.map(np.testing.assert_array_equal, got, want)
            kinds.add((bool(hit.any()), int(want[-1][0]) > 0))
    assert kinds == {(False, False), (False, True), (True, False), (True, True)}  # every branch case was met
