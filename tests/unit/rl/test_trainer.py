"""memjax.rl.trainer: exact micro-batch accumulation, the learning signal, KL, data-parallel equality."""

import os
import subprocess
import sys
import textwrap
from dataclasses import replace

import jax
import numpy as np
import pytest
from flax import nnx

from memjax import load_hf
from memjax.engine import Engine, EngineConfig, SamplingParams
from memjax.rl import Conversation, build_batch
from memjax.rl.advantages import with_advantages
from memjax.rl.trainer import LossConfig, OptimConfig, Trainer, UpdateConfig

from conftest import golden_dir


def _batch(model, rewards=(1.0, 0.0, 0.5, 0.0), seed=0):
    eng = Engine(model, EngineConfig(max_slots=4, page_size=4, window=64, prefill_slots=2, prefill_chunk=8,
                                     progress=False))
    r = np.random.default_rng(seed)
    prompts = [r.integers(0, 900, int(k)).tolist() for k in (5, 9, 7, 12)]
    outs = eng.generate(prompts * 2, [SamplingParams(temperature=1.0, max_tokens=8, seed=i) for i in range(8)])
    # 4 samples in 2 groups; each sample has two conversations (turns 0 and 1)
    convs = [Conversation(prompts[i], outs[i + 4 * k].token_ids, outs[i + 4 * k].logprobs, sample=i, group=i // 2,
                          turn=k, is_final=k == 1) for i in range(4) for k in range(2)]
    return build_batch(convs, list(rewards), [0, 0, 1, 1])


# One optimizer config for the module's updates (and test_old_logp_reuse's, test_trainer_offpolicy's): its eps, clip and
# weight decay are constants of the compiled update program, `lr` is an argument, so updates of one model, loss and
# micro-batch shape share one program per test session. Adam's first step is ~lr * sign(g) for |g| >> eps, which
# turns rounding in near-zero gradients into full-size differences; eps=1e-3 keeps the update smooth in g so params
# compare gradients; no weight decay, so a zero gradient leaves every parameter as it was.
OPT = OptimConfig(lr=1e-2, warmup_steps=0, grad_clip=0.0, eps=1e-3, weight_decay=0.0)


def _params(m):
    return [np.asarray(x) for x in jax.tree.leaves(nnx.state(m, nnx.Param))]


@pytest.fixture(scope="module")
def batch():
    return _batch(load_hf(golden_dir("untied_kv2")))


@pytest.mark.parametrize("agg", ["token-mean", "seq-mean-token-mean"])
def test_micro_batches_give_the_full_batch_update(batch, agg):
    out = []
    for micro in (8, 3):
        m = load_hf(golden_dir("untied_kv2"))
        tr = Trainer(m, OPT, LossConfig(agg=agg), UpdateConfig(micro_rows=micro, pad_tokens=16))
        stats = tr.update(with_advantages(batch))
        assert stats["optimizer_steps"] == 1 and stats["logp_mismatch_max"] < 1e-5
        out.append((_params(m), stats["grad_norm"]))
    assert abs(out[0][1] - out[1][1]) < 1e-5 * out[0][1]
    for a, b in zip(out[0][0], out[1][0]):
        np.testing.assert_allclose(a, b, atol=2e-6)


def test_step_level_loss_is_exact_across_micro_batches(batch):
    """level="step" (Memory-R2): at the first step ratios are 1, so the loss is -mean over steps (rows) of
    the step's mean advantage; 8- and 3-row micro-batches give the same update."""
    b = with_advantages(batch)
    rows = b.loss_mask.sum(1) > 0
    want = -np.mean((b.advantages * b.loss_mask).sum(1)[rows] / b.loss_mask.sum(1)[rows])
    out = []
    for micro in (8, 3):
        m = load_hf(golden_dir("untied_kv2"))
        tr = Trainer(m, OPT, LossConfig(level="step"), UpdateConfig(micro_rows=micro, pad_tokens=16))
        stats = tr.update(b)
        assert abs(stats["loss"] - want) < 1e-5
        out.append(_params(m))
    for x, y in zip(*out):
        np.testing.assert_allclose(x, y, atol=2e-6)
    with pytest.raises(ValueError, match="level"):
        LossConfig(level="sequence")


def test_trainer_consumes_the_batch_advantages(batch):
    """Equal rewards (the MemAgent rule would give 0 everywhere) but supplied per-token advantages: +1 on
    sample 1, -1 on sample 0, 0 on samples 2 and 3; the update follows what was supplied."""
    m = load_hf(golden_dir("untied_kv2"))
    tr = Trainer(m, replace(OPT, lr=3e-3), update=UpdateConfig(micro_rows=8, pad_tokens=16))
    sign = np.array([-1.0, 1.0, 0.0, 0.0], np.float32)[batch.sample][:, None]
    flat = batch.replace(reward=np.ones(4, np.float32), advantages=sign * batch.loss_mask)
    before = tr.logprobs(m, flat)
    tr.update(flat)
    delta = tr.logprobs(m, flat) - before
    per = [np.abs(delta[(flat.sample == s)[:, None] & (flat.loss_mask > 0)]).sum() for s in range(4)]
    got = [delta[(flat.sample == s)[:, None] & (flat.loss_mask > 0)].sum() for s in range(2)]
    assert got[1] > 0 > got[0] and min(per[:2]) > max(per[2:])


def test_updates_follow_the_advantage(batch):
    m = load_hf(golden_dir("untied_kv2"))
    # row_buckets=(32,): a mini-batch's rows are 32 long as the whole batch's (the other tests' update program)
    tr = Trainer(m, replace(OPT, lr=3e-3), update=UpdateConfig(micro_rows=8, pad_tokens=16, row_buckets=(32,),
                                                                ppo_epochs=2, mini_batches=2))
    before = tr.logprobs(m, batch)
    stats = tr.update(with_advantages(batch))
    assert stats["optimizer_steps"] == 4
    after = tr.logprobs(m, batch)
    mask = batch.loss_mask > 0
    delta = [(after - before)[(batch.sample == s)[:, None] & mask].sum() for s in range(4)]
    # group 0: rewards 1 vs 0 -> advantages +0.5 / -0.5; group 1: 0.5 vs 0 -> +0.25 / -0.25
    assert delta[0] > 0 > delta[1] and delta[2] > 0 > delta[3]
    zero = batch.replace(reward=np.ones(4, np.float32))  # all-equal groups: no signal at all
    m2 = load_hf(golden_dir("untied_kv2"))
    p0 = _params(m2)
    Trainer(m2, replace(OPT, lr=3e-3), update=UpdateConfig(micro_rows=8, pad_tokens=16)).update(with_advantages(zero))
    assert all(np.array_equal(a, b) for a, b in zip(p0, _params(m2)))


def test_kl_needs_reference_and_is_reported(batch):
    m = load_hf(golden_dir("untied_kv2"))
    with pytest.raises(ValueError, match="reference model"):
        Trainer(m, loss=LossConfig(kl_coef=0.1))
    tr = Trainer(m, OptimConfig(lr=1e-2, warmup_steps=0), LossConfig(kl_coef=0.1, entropy_coef=0.01),
                 UpdateConfig(micro_rows=8, pad_tokens=16, ppo_epochs=2), ref_model=load_hf(golden_dir("untied_kv2")))
    stats = tr.update(with_advantages(batch))
    assert "kl_ref" in stats and "entropy" in stats and stats["entropy"] > 0


@pytest.mark.e2e
def test_sharded_meshes_equal_single_device():
    """8 simulated CPU devices: data x fsdp (2 x 4) and data x fsdp x tensor (2 x 2 x 2) meshes give the
    single-device loss, gradient norm and updated parameters (rows sharded, parameters FSDP/TP-sharded)."""
    script = textwrap.dedent(f"""
        import os, sys
        sys.path[:0] = [{os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))!r}, {os.path.dirname(os.path.abspath(__file__))!r}]
        import jax, numpy as np
        jax.config.update("jax_default_matmul_precision", "highest")
        from flax import nnx
        from memjax import load_hf
        from memjax.parallel import make_mesh
        from memjax.rl.advantages import with_advantages
        from memjax.rl.trainer import OptimConfig, Trainer, UpdateConfig
        from test_trainer import _batch
        from conftest import golden_dir
        assert len(jax.devices()) == 8
        res = []
        b = _batch(load_hf(golden_dir("untied_kv2")))  # one rollout: every mesh updates on the same batch
        for mesh in (None, make_mesh(data=2, fsdp=4), make_mesh(data=2, fsdp=2, tensor=2)):
            m = load_hf(golden_dir("untied_kv2"))
            st = Trainer(m, OptimConfig(lr=1e-2, warmup_steps=0, eps=1e-3),
                         update=UpdateConfig(micro_rows=8, pad_tokens=16), mesh=mesh).update(with_advantages(b))
            if mesh is not None:
                assert "fsdp" in str(m.layers.q_w[...].sharding.spec)
            res.append((st["loss"], st["grad_norm"], [np.asarray(x) for x in jax.tree.leaves(nnx.state(m, nnx.Param))]))
        for loss, gnorm, params in res[1:]:
            assert abs(loss - res[0][0]) <= 1e-6 * max(1.0, abs(res[0][0])), (loss, res[0][0])
            assert abs(gnorm - res[0][1]) <= 1e-5 * res[0][1], (gnorm, res[0][1])
            err = max(float(np.abs(a - c).max()) for a, c in zip(res[0][2], params))
            assert err < 1e-5, err
        print("OK")
    """)
    env = {**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=8", "JAX_PLATFORMS": "cpu"}
    r = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0 and "OK" in r.stdout, r.stderr[-3000:]
