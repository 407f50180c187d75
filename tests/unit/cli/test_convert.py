"""`python -m memjax.convert`: every direction, dtype change, and error reporting."""

import json
import subprocess
import sys

import jax.numpy as jnp
import numpy as np

from memjax.cli import convert
from memjax import load_hf

from conftest import golden_dir, golden_ref
import pytest


def test_hf_orbax_hf_roundtrip(tmp_path):
    src = golden_dir("sharded_kv2")
    assert convert.main(["hf2orbax", str(src), str(tmp_path / "orb")]) == 0
    assert convert.main(["orbax2hf", str(tmp_path / "orb"), str(tmp_path / "hf"), "--max-shard-gb", "0.0002"]) == 0
    assert (tmp_path / "hf" / "model.safetensors.index.json").is_file()
    ref = golden_ref("sharded_kv2")
    a = np.asarray(load_hf(src)(jnp.asarray(ref["input_ids"])))
    b = np.asarray(load_hf(tmp_path / "hf")(jnp.asarray(ref["input_ids"])))
    assert np.array_equal(a, b)


def test_hf2hf_bf16_and_random(tmp_path):
    assert convert.main(["hf2hf", str(golden_dir("tied_kv1")), str(tmp_path / "bf"), "--dtype", "bfloat16"]) == 0
    cfg = json.loads((tmp_path / "bf" / "config.json").read_text())
    assert cfg["torch_dtype"] == "bfloat16"
    assert load_hf(tmp_path / "bf", dtype="bfloat16").embed[...].dtype == jnp.bfloat16
    assert convert.main(["random", "tiny", str(tmp_path / "rnd"), "--seed", "3"]) == 0
    assert load_hf(tmp_path / "rnd").cfg.num_layers == 2


@pytest.mark.e2e
def test_cli_errors_are_one_line(tmp_path):
    r = subprocess.run([sys.executable, "-m", "memjax.convert", "hf2orbax", str(tmp_path / "missing"),
                        str(tmp_path / "o")], capture_output=True, text=True)
    assert r.returncode == 2
    assert r.stderr.strip().count("\n") == 0 and "checkpoint directory not found" in r.stderr
    r = subprocess.run([sys.executable, "-m", "memjax.convert", "random", "no-such-model", str(tmp_path / "o")],
                       capture_output=True, text=True)
    assert r.returncode == 2 and "unknown model preset" in r.stderr


def test_a_non_empty_destination_or_the_source_is_replaced_only_when_asked(tmp_path, capsys):
    many, one = tmp_path / "many", tmp_path / "one"
    assert convert.main(["random", "tiny", str(many), "--max-shard-gb", "0.0001"]) == 0
    assert convert.main(["random", "tiny", str(one), "--seed", "1"]) == 0
    shards = sorted(p.name for p in many.glob("*.safetensors"))
    assert len(shards) > 1
    before = {p.name: p.read_bytes() for p in many.iterdir()}
    capsys.readouterr()
    assert convert.main(["hf2hf", str(one), str(many)]) == 2
    assert capsys.readouterr().err.strip() == (f"memjax.convert: error: {many}: the destination is not empty; give a "
                                               "new or empty directory, or --replace to replace what is there")
    assert convert.main(["hf2hf", str(many), str(many), "--dtype", "bfloat16"]) == 2
    assert "the destination is the source" in capsys.readouterr().err
    assert {p.name: p.read_bytes() for p in many.iterdir()} == before  # nothing touched
    assert convert.main(["hf2hf", str(one), str(many), "--replace"]) == 0
    assert sorted(p.name for p in many.iterdir()) == ["config.json", "model.safetensors"]  # no stale shard left
    assert (many / "model.safetensors").read_bytes() == (one / "model.safetensors").read_bytes()
    assert convert.main(["hf2hf", str(one), str(one), "--dtype", "bfloat16", "--replace"]) == 0
    assert json.loads((one / "config.json").read_text()).get("torch_dtype") == "bfloat16"
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temporary directory left
