"""benchmarks/greedy_match.py and the sweep's --greedy-tokens (issue 47's GPU block compares engine variants' greedy
tokens with them): agreement counted right on made-up arrays, one-line errors, and two real tiny sweeps on CPU (the
default engine and fuse_rope_kv) whose saved tokens are identical."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from benchmarks.greedy_match import compare, main

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[3]


def test_compare_counts_agreement():
    a = np.arange(24, dtype=np.int32).reshape(4, 6)
    b = a.copy()
    b[1, 3:] = 99  # diverges at token 3
    b[2, 5] = -1   # diverges at token 5 (ended early)
    r = compare(a, b)
    assert r["identical_sequences"] == 0.5 and r["median_first_divergence"] == 4.0
    assert r["agreeing_tokens"] == pytest.approx(1 - 4 / 24)
    assert compare(a, a)["median_first_divergence"] is None
    with pytest.raises(ValueError, match="one \\[sequences, tokens\\] shape"):
        compare(a, a[:2])


def test_cli_errors_are_one_line(tmp_path):
    np.save(tmp_path / "a.npy", np.zeros((2, 3), np.int32))
    np.save(tmp_path / "b.npy", np.zeros((3, 3), np.int32))
    with pytest.raises(SystemExit, match="no such file"):
        main([str(tmp_path / "a.npy"), str(tmp_path / "missing.npy")])
    with pytest.raises(SystemExit, match="shape"):
        main([str(tmp_path / "a.npy"), str(tmp_path / "b.npy")])


@pytest.mark.slow(seconds=30)
def test_sweeps_save_greedy_tokens_that_match(tmp_path):
    common = ["-m", "benchmarks.rollout_throughput", "--mode", "sweep", "--preset", "tiny", "--dtype", "float32",
              "--batches", "3", "--prompt-len", "12", "--window", "64", "--page-size", "16", "--decode-tokens", "6",
              "--greedy-tokens", "--out-dir", str(tmp_path)]
    for extra in (["--tag", "_old"], ["--tag", "_fused", "--engine", "kernels.fuse_rope_kv=true"]):
        p = subprocess.run([sys.executable, *common, *extra], cwd=ROOT, capture_output=True, text=True, timeout=600)
        assert p.returncode == 0, p.stderr[-2000:]
    old, fused = (np.load(tmp_path / f"greedy_tiny{t}_b3.npy") for t in ("_old", "_fused"))
    assert old.shape == (3, 7) and (old >= 0).all()
    row = json.loads((tmp_path / "rollout_sweep_tiny_fused_cpu.json").read_text())["rows"][0]
    assert row["greedy_tokens"] == "greedy_tiny_fused_b3.npy"
    res = main([str(tmp_path / "greedy_tiny_old_b3.npy"), str(tmp_path / "greedy_tiny_fused_b3.npy")])
    assert res["identical_sequences"] == 1.0, res
