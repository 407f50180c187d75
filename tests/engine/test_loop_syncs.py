"""The generation loop's branch decisions per round (memjax/engine/loop.py): on XLA:GPU each `lax.cond` /
`lax.switch` and each while loop without a trip count reads its predicate back to the host, so the loop makes as
few as it can: 5 per round in both schedules (8 before 2026-12-02), counted in the loop's jaxpr with the Pallas
attention the engine uses on a GPU (a kernel's own loops run on the device and are not counted). The merged end
of a round, `release_and_admit`, equals releasing the finished slots and then `admit`, on states taken from a real
run with prefix sharing and preemption."""

import jax
import jax.extend
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from memjax.engine import Engine, EngineConfig, SamplingParams
from memjax.engine.config import FINISH_LENGTH
from memjax.engine.loop import make_loop
from memjax.engine.requests import pack_queue
from memjax.engine.sampler import sample
from memjax.engine.scheduler import admit, release, release_and_admit
from memjax.engine.state import init_pool, init_ring, init_slots
from memjax.kernels import engine_attend
from memjax.model import init_model, presets


def decisions(jaxpr) -> int:
    """Host round trips of one execution: a cond is one plus its costliest branch, a while loop without a trip
    count one per iteration (counted once) plus its body's, a scan its body's times its length; the equations
    inside a kernel (pallas_call) run on the device."""
    n = 0
    for eqn in jaxpr.eqns:
        name = eqn.primitive.name
        if name == "pallas_call":
            continue
        if name == "cond":
            n += 1 + max(decisions(b.jaxpr) for b in eqn.params["branches"])
        elif name == "while":
            n += 1 + decisions(eqn.params["body_jaxpr"].jaxpr) + decisions(eqn.params["cond_jaxpr"].jaxpr)
        elif name == "scan":
            n += eqn.params["length"] * decisions(eqn.params["jaxpr"].jaxpr)
        else:
            n += sum(decisions(sub) for sub in jax.extend.core.jaxprs_in_params(eqn.params))
    return n


@pytest.mark.parametrize("schedule", ["split", "mixed"])
def test_five_branch_decisions_per_round(schedule):
    """Per round: the loop's predicate, the round's kind (split: idle / prefill / decode; mixed: its row size), the
    page check's preemption loop, the sampler's top-p / top-k branch, and release + admit."""
    cfg = presets.get("tiny")
    model = nnx.eval_shape(lambda: init_model(cfg, 0))
    ecfg = EngineConfig(max_slots=4, window=64, page_size=16, prefill_slots=2, prefill_chunk=32, schedule=schedule,
                        attention="pallas", progress=False, num_pages=20)
    run = make_loop(nnx.graphdef(model), cfg, ecfg, attend=engine_attend(impl="pallas", num_splits=2))
    queue = jax.tree.map(lambda a: a[0], pack_queue([[]], ecfg, ecfg.queue_len))
    jaxpr = jax.make_jaxpr(run)(nnx.state(model, nnx.Param), init_slots(ecfg), init_pool(cfg, ecfg, 20), queue,
                                init_ring(ecfg), jnp.int32(4), jnp.int32(0)).jaxpr
    loops = [e for e in jaxpr.eqns if e.primitive.name == "while"]
    assert len(loops) == 1  # the rounds; before it, the call's first admission (one decision per call)
    assert decisions(loops[0].params["body_jaxpr"].jaxpr) + 1 == 5
    assert decisions(jaxpr) == 5 + 1


def test_sampler_decides_truncation_once():
    b, v = 3, 40
    jaxpr = jax.make_jaxpr(sample)(jnp.zeros((b, v)), jnp.ones(b), jnp.ones(b), jnp.zeros(b, jnp.int32),
                                   jnp.zeros(b, jnp.int32), jnp.zeros(b, jnp.int32), jnp.zeros(b, bool)).jaxpr
    assert decisions(jaxpr) == 1


@pytest.fixture(scope="module")
def states():
    """(slots, pool, queue, ring) after each of the first rounds of a run whose 12 requests (3 prompts x 4, so
    groups share their prompt pages) do not all fit in 4 slots and a 10-page pool: admissions wait, pages run out."""
    ecfg = EngineConfig(max_slots=4, window=32, page_size=4, prefill_slots=2, prefill_chunk=8, schedule="split",
                        progress=False, num_pages=10, rounds_per_sync=1)
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
