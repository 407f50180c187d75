"""`make demo` entry point runs end to end (small generation budget and 2 RL steps to keep CI fast; the
learning itself is tested in tests/tiny/test_tiny.py)."""

from memjax import demo


def test_demo_runs(tmp_path, capsys):
    assert demo.main(["--out", str(tmp_path / "demo"), "--max-new-tokens", "4", "--rl-steps", "2",
                      "--rl-heldout", "16"]) == 0
    out = capsys.readouterr().out
    assert "bit-identical to the original: yes" in out and "foundation finished" in out
    assert "held-out accuracy" in out and "demo finished" in out
    assert (tmp_path / "demo" / "hf_roundtrip" / "config.json").is_file()
    assert (tmp_path / "demo" / "tiny" / "reward_curve.png").is_file()
