"""`python -m memjax.convert`: every direction, dtype change, and error reporting."""

import json
import subprocess
import sys

import jax.numpy as jnp
import numpy as np

from memjax import convert, load_hf

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
