"""memjax.rl.logprobs recomputes the engine's log-probs in both SamplingParams.logprobs modes."""

import jax.numpy as jnp
import numpy as np

from memjax.engine import Engine, EngineConfig, SamplingParams
from memjax.model import init_model, presets
from memjax.rl.logprobs import token_logprobs


def test_trainer_recomputes_raw_and_processed_engine_logprobs():
    model = init_model(presets.get("tiny"), seed=4)
    eng = Engine(model, EngineConfig(max_slots=4, page_size=4, window=64, prefill_slots=2, prefill_chunk=8,
                                     progress=False))
    r = np.random.default_rng(0)
    prompts = [r.integers(0, 512, int(k)).tolist() for k in (5, 17, 9)]
    kw = dict(temperature=0.8, top_p=0.7, top_k=20, max_tokens=12)
    raw = eng.generate(prompts, [SamplingParams(**kw, seed=i) for i in range(3)])
    proc = eng.generate(prompts, [SamplingParams(**kw, seed=i, logprobs="processed") for i in range(3)])
    assert [o.token_ids for o in raw] == [o.token_ids for o in proc]  # the mode never changes sampling
    t = max(len(p) + len(o.token_ids) for p, o in zip(prompts, raw))
    ids, mask = np.zeros((3, t), np.int32), np.zeros((3, t), np.int32)
    for i, (p, o) in enumerate(zip(prompts, raw)):
        ids[i, : len(p) + len(o.token_ids)] = p + o.token_ids
        mask[i, len(p): len(p) + len(o.token_ids)] = 1
    for outs, mode in ((raw, "raw"), (proc, "processed")):
        lp, _ = token_logprobs(model, jnp.asarray(ids), jnp.asarray(mask), temperature=0.8, logprobs=mode,
                               top_p=0.7, top_k=20, impl="reference")
        lp = np.asarray(lp)
        for i, (p, o) in enumerate(zip(prompts, outs)):
            np.testing.assert_allclose(o.logprobs, lp[i, len(p): len(p) + len(o.token_ids)], atol=1e-5)
    gap = np.concatenate([np.subtract(b.logprobs, a.logprobs) for a, b in zip(raw, proc)])
    assert (gap >= -1e-6).all() and (gap > 1e-3).any()
