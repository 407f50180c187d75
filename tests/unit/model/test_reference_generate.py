"""memjax.model.reference_generate: greedy decoding oracle (golden parity is in test_hf.py)."""

import jax.numpy as jnp
import numpy as np
import pytest

from memjax.model import greedy_generate, init_model, presets


@pytest.fixture(scope="module")
def model():
    return init_model(presets.get("tiny"), seed=2)


def test_tokens_are_argmax_of_full_forward(model):
    prompt = [7, 3, 9, 1]
    new, lps = greedy_generate(model, prompt, 5)
    seq = prompt + new
    logits = np.asarray(model(jnp.asarray([seq], jnp.int32)))[0]
    for i, tok in enumerate(new):
        row = logits[len(prompt) + i - 1]
        assert tok == int(row.argmax())
        lse = np.log(np.exp(row - row.max()).sum()) + row.max()
        assert abs(lps[i] - (row[tok] - lse)) < 1e-4


def test_stops_on_stop_token(model):
    new, _ = greedy_generate(model, [7, 3, 9, 1], 6)
    stopped, lps = greedy_generate(model, [7, 3, 9, 1], 6, stop_token_ids=(new[1],))
    assert stopped == new[: new.index(new[1]) + 1] and len(lps) == len(stopped)


def test_bad_arguments(model):
    with pytest.raises(ValueError, match="prompt_ids is empty"):
        greedy_generate(model, [], 3)
    with pytest.raises(ValueError, match="max_new_tokens"):
        greedy_generate(model, [1], 0)
