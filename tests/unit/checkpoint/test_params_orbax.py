"""memjax.checkpoint.params_orbax: orbax parameter checkpoints round-trip exactly."""

import jax.numpy as jnp
import numpy as np
import pytest

from memjax.checkpoint import CheckpointError
from memjax.checkpoint.params_orbax import load_params, save_params
from memjax.model import init_model, presets


def test_roundtrip_and_dtype_cast(tmp_path):
    model = init_model(presets.get("tiny", tie_word_embeddings=False), seed=7)
    save_params(model, tmp_path / "ck")
    back = load_params(tmp_path / "ck")
    assert back.cfg == model.cfg
    ids = jnp.asarray([[1, 2, 3, 4]], jnp.int32)
    assert np.array_equal(np.asarray(model(ids)), np.asarray(back(ids)))
    half = load_params(tmp_path / "ck", dtype="bfloat16")
    assert half.layers.q_w[...].dtype == jnp.bfloat16 and half.cfg.dtype == "bfloat16"
    np.testing.assert_array_equal(np.asarray(half.lm_head[...]),
                                  np.asarray(model.lm_head[...].astype(jnp.bfloat16)))


def test_refuses_overwrite_and_bad_dirs(tmp_path):
    model = init_model(presets.get("tiny"))
    save_params(model, tmp_path / "ck")
    with pytest.raises(CheckpointError, match="already exists"):
        save_params(model, tmp_path / "ck")
    with pytest.raises(CheckpointError, match="not a memjax orbax parameter checkpoint"):
        load_params(tmp_path / "empty")
    (tmp_path / "ck" / "memjax_model.json").write_text('{"vocab_size": -1}')
    with pytest.raises(CheckpointError, match="invalid model config"):
        load_params(tmp_path / "ck")
