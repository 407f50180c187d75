"""memjax.checkpoint.hf against real transformers outputs (golden fixtures) and its failure modes."""

import json
import shutil
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from safetensors.numpy import load_file, save_file

import memjax
from memjax.checkpoint import CheckpointError, load_hf, save_hf
from memjax.model import count_params, greedy_generate, init_model, presets

from conftest import GOLDEN_MODELS, golden_dir, golden_ref


def _params(model):
    return {"/".join(map(str, p)): np.asarray(v) for p, v in
            jax.tree_util.tree_leaves_with_path(nnx.state(model, nnx.Param))}


@pytest.mark.parametrize("name", GOLDEN_MODELS)
def test_golden_logits_within_1e4_of_transformers(name):
    ref = golden_ref(name)
    model = memjax.load_hf(golden_dir(name), dtype="float32")
    logits = np.asarray(model(jnp.asarray(ref["input_ids"])))
    assert logits.shape == ref["logits"].shape
    assert np.abs(logits - ref["logits"]).max() < 1e-4
    assert count_params(model.cfg) == int(ref["param_count"])


@pytest.mark.parametrize("name", GOLDEN_MODELS)
def test_golden_greedy_continuation_matches_transformers(name):
    ref = golden_ref(name)
    model = load_hf(golden_dir(name))
    new, lps = greedy_generate(model, ref["greedy_prompt"].tolist(), len(ref["greedy_ids"]))
    assert new == ref["greedy_ids"].tolist()
    assert all(lp <= 0 for lp in lps)


def test_both_config_styles_are_read():
    legacy = json.loads((golden_dir("untied_kv2") / "config.json").read_text())
    modern = json.loads((golden_dir("tied_kv1") / "config.json").read_text())
    assert "rope_theta" in legacy and not legacy.get("rope_parameters")
    assert "rope_parameters" in modern
    assert load_hf(golden_dir("untied_kv2")).cfg.rope_theta == 1e6
    assert load_hf(golden_dir("tied_kv1")).cfg.rope_theta == 1e4


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("shard", [None, 40_000])
def test_save_load_roundtrip_bit_exact(tmp_path, dtype, shard):
    cfg = presets.get("tiny", param_dtype=dtype, dtype=dtype, tie_word_embeddings=False)
    model = init_model(cfg, seed=4)
    save_hf(model, tmp_path, **({"max_shard_bytes": shard} if shard else {}))
    files = sorted(p.name for p in tmp_path.iterdir())
    if shard:
        assert "model.safetensors.index.json" in files and len([f for f in files if f.startswith("model-")]) > 1
    else:
        assert "model.safetensors" in files
    back = load_hf(tmp_path, dtype=dtype)
    a, b = _params(model), _params(back)
    assert a.keys() == b.keys()
    for k in a:
        assert a[k].dtype == b[k].dtype and np.array_equal(a[k], b[k]), k
    ids = jnp.asarray([[3, 1, 4, 1, 5]], jnp.int32)
    assert np.array_equal(np.asarray(model(ids)), np.asarray(back(ids)))


def test_resave_golden_is_tensor_identical(tmp_path):
    """Saving a loaded transformers checkpoint reproduces its tensors exactly (names, layout, values)."""
    src = golden_dir("untied_kv2")
    save_hf(load_hf(src), tmp_path)
    a, b = load_file(src / "model.safetensors"), load_file(tmp_path / "model.safetensors")
    assert a.keys() == b.keys()
    for k in a:
        assert np.array_equal(a[k], b[k]), k


def test_tied_checkpoint_omits_lm_head(tmp_path):
    save_hf(load_hf(golden_dir("tied_kv1")), tmp_path)
    names = load_file(tmp_path / "model.safetensors").keys()
    assert "lm_head.weight" not in names and "model.embed_tokens.weight" in names
    assert json.loads((tmp_path / "config.json").read_text())["tie_word_embeddings"] is True


# -- failure modes: one clear error naming the file / tensor ----------------------------------------

@pytest.fixture
def ckpt(tmp_path):
    d = tmp_path / "ckpt"
    shutil.copytree(golden_dir("untied_kv2"), d)
    return d


def _edit_config(d: Path, **changes):
    cfg = json.loads((d / "config.json").read_text())
    cfg.update(changes)
    (d / "config.json").write_text(json.dumps(cfg))


def test_missing_directory(tmp_path):
    with pytest.raises(CheckpointError, match="checkpoint directory not found"):
        load_hf(tmp_path / "nope")


def test_missing_config(ckpt):
    (ckpt / "config.json").unlink()
    with pytest.raises(CheckpointError, match=r"config\.json: file not found"):
        load_hf(ckpt)


def test_missing_weights(ckpt):
    (ckpt / "model.safetensors").unlink()
    with pytest.raises(CheckpointError, match="neither model.safetensors nor"):
        load_hf(ckpt)


def test_missing_shard(tmp_path):
    d = tmp_path / "s"
    shutil.copytree(golden_dir("sharded_kv2"), d)
    victim = sorted(d.glob("model-*.safetensors"))[1]
    victim.unlink()
    with pytest.raises(CheckpointError, match=victim.name):
        load_hf(d)


def test_corrupt_safetensors(ckpt):
    (ckpt / "model.safetensors").write_bytes(b"\x10\x00\x00\x00garbage-not-a-header")
    with pytest.raises(CheckpointError, match=r"model\.safetensors: corrupt"):
        load_hf(ckpt)


def test_truncated_safetensors(ckpt):
    data = (ckpt / "model.safetensors").read_bytes()
    (ckpt / "model.safetensors").write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError, match=r"model\.safetensors"):
        load_hf(ckpt)


def test_shape_mismatch_names_tensor(ckpt):
    tensors = load_file(ckpt / "model.safetensors")
    name = "model.layers.1.self_attn.k_proj.weight"
    tensors[name] = tensors[name][:-1]
    save_file(tensors, str(ckpt / "model.safetensors"), metadata={"format": "pt"})
    with pytest.raises(CheckpointError, match=rf"{name}.*has shape \(31, 96\), expected \(32, 96\)"):
        load_hf(ckpt)


def test_missing_tensor_named(ckpt):
    tensors = load_file(ckpt / "model.safetensors")
    del tensors["lm_head.weight"]
    save_file(tensors, str(ckpt / "model.safetensors"), metadata={"format": "pt"})
    with pytest.raises(CheckpointError, match="'lm_head.weight' is missing"):
        load_hf(ckpt)


def test_unexpected_tensor_named(ckpt):
    tensors = load_file(ckpt / "model.safetensors")
    tensors["model.layers.9.mlp.up_proj.weight"] = tensors["model.layers.0.mlp.up_proj.weight"]
    save_file(tensors, str(ckpt / "model.safetensors"), metadata={"format": "pt"})
    with pytest.raises(CheckpointError, match="unexpected tensors.*layers.9"):
        load_hf(ckpt)


@pytest.mark.parametrize("changes,msg", [
    ({"architectures": ["LlamaForCausalLM"], "model_type": "llama"}, "not supported; expected Qwen2ForCausalLM"),
    ({"rope_scaling": {"type": "yarn", "factor": 4.0}}, "rope_type='yarn' is not supported"),
    ({"rope_parameters": {"rope_type": "dynamic", "rope_theta": 1e6}}, "rope_type='dynamic'"),
    ({"use_sliding_window": True}, "use_sliding_window=true is not supported"),
    ({"hidden_act": "gelu"}, "hidden_act='gelu'"),
    ({"num_key_value_heads": 4}, "multiple of num_kv_heads"),
    ({"rope_parameters": {"rope_type": "default", "rope_theta": 5.0}}, "disagrees"),
])
def test_config_rejections(ckpt, changes, msg):
    _edit_config(ckpt, **changes)
    with pytest.raises(CheckpointError, match=msg) as e:
        load_hf(ckpt)
    assert "config.json" in str(e.value)


def test_corrupt_config_json(ckpt):
    (ckpt / "config.json").write_text("{not json")
    with pytest.raises(CheckpointError, match=r"config\.json: not valid JSON"):
        load_hf(ckpt)


def test_load_with_placer_and_bf16(ckpt):
    seen = []

    def place(name, arr):
        seen.append((name, arr.dtype))
        return jnp.asarray(arr)

    m = load_hf(ckpt, dtype="bfloat16", place=place)
    assert m.embed[...].dtype == jnp.bfloat16 and m.cfg.dtype == "bfloat16"
    assert {n for n, _ in seen} == set(memjax.model.param_shapes(m.cfg))
    ref = golden_ref("untied_kv2")
    l16 = np.asarray(m(jnp.asarray(ref["input_ids"])))
    assert np.abs(l16 - ref["logits"]).max() < 0.05 * np.abs(ref["logits"]).max()
