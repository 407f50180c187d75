"""`make demo` entry point runs end to end (small generation budget to keep CI fast)."""

from memjax import demo


def test_demo_runs(tmp_path, capsys):
    assert demo.main(["--out", str(tmp_path / "demo"), "--max-new-tokens", "4"]) == 0
    out = capsys.readouterr().out
    assert "bit-identical to the original: yes" in out and "demo finished" in out
    assert (tmp_path / "demo" / "hf_roundtrip" / "config.json").is_file()
