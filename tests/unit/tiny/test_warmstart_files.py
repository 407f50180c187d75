"""memjax.systems.memagent.tiny.warmstart file helpers shared by every tiny warm start: a missing warm start is trained once,
saved with its info JSON and loaded; a present one is loaded without training."""

import jax
import numpy as np
from flax import nnx

from memjax.model import init_model, presets
from memjax.tiny.sft import load_or_train, save_model


def test_missing_warm_start_is_trained_saved_and_loaded(tmp_path):
    calls, logs = [], []
    model = init_model(presets.get("tiny"), seed=4)

    def train_fn(log):
        calls.append(1)
        return model, {"steps": 3}

    save_fn = lambda m, info, out: save_model(m, info, out, "x_warmstart.json")
    path = tmp_path / "ws"
    got, info = load_or_train(path, "x_warmstart.json", train_fn, save_fn, what="x warm start", log=logs.append)
    assert calls == [1] and info == {"steps": 3} and "no x warm start at" in logs[0]
    a, b = nnx.state(model, nnx.Param), nnx.state(got, nnx.Param)
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
    _, info = load_or_train(path, "x_warmstart.json", train_fn, save_fn, what="x warm start", log=logs.append)
    assert calls == [1] and info == {"steps": 3} and len(logs) == 1  # present: loaded, not trained

