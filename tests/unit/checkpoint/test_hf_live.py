"""Live parity with Hugging Face transformers, run where torch + transformers import (e.g. GPU nodes).

On machines without them (CI, laptops) these tests skip with that reason; the committed golden fixtures
(test_hf.py) cover the same ground there.
"""

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="live transformers parity needs torch (not installed here; "
                            "golden fixtures in test_hf.py cover CPU CI)")
transformers = pytest.importorskip("transformers", reason="live parity needs transformers")

import jax.numpy as jnp  # noqa: E402

from memjax import load_hf, save_hf  # noqa: E402
from memjax.model import greedy_generate, init_model, presets  # noqa: E402

from conftest import GOLDEN_MODELS, golden_dir  # noqa: E402


def _hf(path):
    m = transformers.Qwen2ForCausalLM.from_pretrained(str(path), torch_dtype=torch.float32,
                                                      attn_implementation="eager")
    return m.eval()


@pytest.mark.parametrize("name", GOLDEN_MODELS)
def test_live_logits_on_fresh_inputs(name):
    ids = np.random.default_rng(11).integers(0, 400, (2, 33)).astype(np.int32)
    ours = np.asarray(load_hf(golden_dir(name))(jnp.asarray(ids)))
    with torch.no_grad():
        theirs = _hf(golden_dir(name))(torch.from_numpy(ids.astype(np.int64))).logits.numpy()
    assert np.abs(ours - theirs).max() < 1e-4


@pytest.mark.parametrize("tied", [True, False])
def test_save_hf_loads_in_transformers(tmp_path, tied):
    model = init_model(presets.get("tiny", tie_word_embeddings=tied), seed=5)
    save_hf(model, tmp_path, max_shard_bytes=60_000)
    ids = np.random.default_rng(12).integers(0, 512, (2, 21)).astype(np.int32)
    with torch.no_grad():
        hf = _hf(tmp_path)
        theirs = hf(torch.from_numpy(ids.astype(np.int64))).logits.numpy()
    assert sum(p.numel() for p in hf.parameters()) == sum(
        int(np.prod(s)) for s in __import__("memjax").model.param_shapes(model.cfg).values())
    assert np.abs(np.asarray(model(jnp.asarray(ids))) - theirs).max() < 1e-4
    prompt = ids[0, :6].tolist()
    ours_new, _ = greedy_generate(model, prompt, 8)
    out = hf.generate(torch.tensor([prompt]), do_sample=False, max_new_tokens=8, min_new_tokens=8,
                      pad_token_id=0)
    assert ours_new == out[0, 6:].tolist()
