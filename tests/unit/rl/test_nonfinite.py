"""A non-finite loss or gradient never reaches the parameters (issue 23, item 3): "stop" raises
NonFiniteError with the model untouched; "skip" drops the step and counts it."""

import jax
import numpy as np
import pytest
from flax import nnx

from memjax import load_hf
from memjax.rl import Conversation, build_batch
from memjax.rl.advantages import with_advantages
from memjax.rl.trainer import NonFiniteError, OptimConfig, Trainer, UpdateConfig

from conftest import golden_dir


def _batch(rewards):
    r = np.random.default_rng(0)
    convs = [Conversation(r.integers(0, 500, 6).tolist(), r.integers(0, 500, 4).tolist(), [-1.0] * 4, sample=i,
                          group=i // 2, turn=0, is_final=True) for i in range(4)]
    return build_batch(convs, list(rewards), [0, 0, 1, 1])


def _params(m):
    return [np.asarray(x) for x in jax.tree.leaves(nnx.state(m, nnx.Param))]


@pytest.mark.parametrize("policy", ["stop", "skip"])
def test_nan_loss_never_reaches_the_parameters(policy):
    m = load_hf(golden_dir("untied_kv2"))
    before = _params(m)
    tr = Trainer(m, OptimConfig(lr=1e-2, warmup_steps=0, on_nonfinite=policy), update=UpdateConfig(pad_tokens=16))
    bad = _batch([1.0, float("nan"), 0.0, 1.0])  # a NaN reward -> NaN advantages -> NaN loss and gradient
    if policy == "stop":
        with pytest.raises(NonFiniteError, match="non-finite .* the update was not applied"):
            tr.update(with_advantages(bad))
    else:
        stats = tr.update(with_advantages(bad))
        assert stats["skipped_steps"] == 1 and stats["optimizer_steps"] == 0
    assert all(np.array_equal(a, b) for a, b in zip(before, _params(m)))
    stats = tr.update(with_advantages(_batch([1.0, 0.0, 0.0, 1.0])))  # a good batch still trains
    assert stats["optimizer_steps"] == 1 and np.isfinite(stats["grad_norm"]) and stats["grad_norm"] > 0
    assert all(np.isfinite(p).all() for p in _params(m)) and not all(
        np.array_equal(a, b) for a, b in zip(before, _params(m)))
