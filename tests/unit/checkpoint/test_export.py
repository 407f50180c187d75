"""The servable export (memjax/checkpoint/export.py) and `python -m memjax.convert export`: the directory holds
weights, config, tokenizer, generation config and model card; memjax's greedy tokens on the exports equal what real
transformers generated from the same directories (tests/fixtures/hf_export/parity.json, made by
scripts/hf_export_parity.py in a torch + transformers environment), and live when torch and transformers import."""

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest

from memjax.checkpoint import save_hf
from memjax.cli.model_dir import load_tokenizer
from memjax.core.config import load_config_file
from memjax.core.tokenizer import Tokenizer
from scripts.hf_export_parity import check, make_exports

ROOT = Path(__file__).resolve().parents[3]
FIXTURE = ROOT / "tests" / "fixtures" / "hf_export" / "parity.json"
SERVABLE = {"README.md", "config.json", "generation_config.json", "model.safetensors", "tokenizer.json",
            "tokenizer_config.json"}


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
    root = tmp_path_factory.mktemp("hfx")
    return root, make_exports(root)


def test_greedy_tokens_equal_transformers_fixture(exports):
    _, record = exports
    golden = json.loads(FIXTURE.read_text())
    for name in ("qwen_vocab", "tiny"):
        assert len(record[name]) == len(golden[name]) == 2
        for ours, theirs in zip(record[name], golden[name]):
            assert ours["prompt_ids"] == theirs["prompt_ids"]  # transformers' rendering of the exported template
            assert ours["greedy_ids"] == theirs["greedy_ids"]
    assert len(set(golden["tiny"][0]["greedy_ids"])) >= 3  # not a run of one token


def test_export_is_a_complete_directory(exports):
    root, _ = exports
    for name in ("qwen_vocab", "tiny"):
        files = {p.name for p in (root / name).iterdir()}
        assert SERVABLE <= files, files
        gen = json.loads((root / name / "generation_config.json").read_text())
        assert gen["do_sample"] is False and "pad_token_id" in gen
    qwen = json.loads((root / "qwen_vocab" / "tokenizer_config.json").read_text())
    shipped = Path(Tokenizer.default().source)
    assert (root / "qwen_vocab" / "tokenizer.json").read_bytes() == (ROOT / "memjax" / "assets" / shipped.name /
                                                                      "tokenizer.json").read_bytes()
    assert "chat_template" in qwen
    assert json.loads((root / "qwen_vocab" / "generation_config.json").read_text())["eos_token_id"] == [151645, 151643]
    tiny = load_tokenizer(root / "tiny")
    assert type(tiny).__name__ == "TinyTokenizer" and tiny.decode(tiny.encode("ann bob")) == "ann bob"


def test_model_dir_without_tokenizer_is_one_line(tmp_path):
    with pytest.raises(ValueError, match="no tokenizer.json"):
        load_tokenizer(tmp_path)


def _tiny_run(tmp_path) -> Path:
    """A finished tiny run's files: hf/ as the loop wrote it before the export (weights only) and result.json."""
    from memjax.systems import get

    cls = get("tiny")
    model, _ = cls(cls.section()).load_model(None)
    run = tmp_path / "run"
    save_hf(model, run / "hf")
    cfg = dataclasses.asdict(load_config_file(ROOT / "configs" / "tiny.py"))
    (run / "result.json").write_text(json.dumps({
        "config": cfg, "system": "tiny", "code": "abc123", "history": [{"step": 1}, {"step": 2}],
        "before": {"step": 0, "accuracy": 0.25}, "after": {"step": 2, "accuracy": 0.5}}))
    return run


@pytest.mark.e2e
def test_convert_export_reexports_a_run(tmp_path):
    run = _tiny_run(tmp_path)
    dst = tmp_path / "served"
    p = subprocess.run([sys.executable, "-m", "memjax.convert", "export", str(run), str(dst)], capture_output=True,
                       text=True, cwd=ROOT)
    assert p.returncode == 0, p.stderr
    assert SERVABLE | {"memjax.json"} <= {f.name for f in dst.iterdir()}
    card = (dst / "README.md").read_text()
    assert "system: `tiny`" in card and "steps trained: 2" in card and "`abc123`" in card
    assert "| accuracy | 0.25 | 0.5 |" in card and "license: apache-2.0" in card
    assert json.loads((dst / "memjax.json").read_text())["system"] == "tiny"
    assert type(load_tokenizer(dst)).__name__ == "TinyTokenizer"


@pytest.mark.e2e
def test_convert_random_small_vocab_says_no_tokenizer(tmp_path):
    p = subprocess.run([sys.executable, "-m", "memjax.convert", "random", "tiny", str(tmp_path / "r")],
                       capture_output=True, text=True, cwd=ROOT)
    assert p.returncode == 0 and "no tokenizer written" in p.stderr
    assert not (tmp_path / "r" / "tokenizer.json").exists()


def test_live_transformers_parity(exports, tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    root, _ = exports
    assert check(root, tmp_path / "parity.json") == 0


def _vllm_qwen2_names(cfg: dict) -> set[str]:
    """The tensor names vLLM's Qwen2ForCausalLM loader consumes (Hugging Face's names: it stacks q/k/v_proj into
    qkv_proj and gate/up_proj into gate_up_proj itself, and skips lm_head.weight when the embeddings are tied)."""
    names = {"model.embed_tokens.weight", "model.norm.weight"}
    if not cfg.get("tie_word_embeddings", False):
        names.add("lm_head.weight")
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        names |= {p + f"self_attn.{m}_proj.{w}" for m in "qkv" for w in ("weight", "bias")}
        names |= {p + "self_attn.o_proj.weight", p + "input_layernorm.weight", p + "post_attention_layernorm.weight"}
        names |= {p + f"mlp.{m}_proj.weight" for m in ("gate", "up", "down")}
    return names


def test_export_has_the_files_and_names_vllms_loader_reads(exports, tmp_path):
    """What vLLM's loader reads, as far as it can be checked without a GPU or vLLM: config.json names a registered
    architecture, the safetensors hold exactly Qwen2's Hugging Face tensor names, and a sharded export's index maps
    every tensor to a file that holds it."""
    from safetensors import safe_open

    from memjax.checkpoint.export import export_hf
    from memjax.model import init_model, presets

    root, _ = exports
    cfg = json.loads((root / "qwen_vocab" / "config.json").read_text())
    assert cfg["architectures"] == ["Qwen2ForCausalLM"] and cfg["model_type"] == "qwen2" and cfg["torch_dtype"]
    with safe_open(root / "qwen_vocab" / "model.safetensors", framework="numpy") as f:
        assert set(f.keys()) == _vllm_qwen2_names(cfg)
    model = init_model(presets.get("tiny-qwen-vocab"), 0)  # fp32: the 39 MB embedding alone fills a 20 MB shard
    out = export_hf(model, tmp_path / "sharded", tokenizer=Tokenizer.default(), max_shard_bytes=20_000_000)
    index = json.loads((out / "model.safetensors.index.json").read_text())["weight_map"]
    held = {}
    for shard in sorted(set(index.values())):
        with safe_open(out / shard, framework="numpy") as f:
            held.update({k: shard for k in f.keys()})
    assert len(set(index.values())) > 1 and held == index
    assert set(index) == _vllm_qwen2_names(json.loads((out / "config.json").read_text()))
