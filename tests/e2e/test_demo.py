"""`make demo` entry point runs end to end (small generation budget and 2 RL steps to keep CI fast; the
learning itself is tested in tests/unit/systems/memagent/tiny/test_tiny.py).

Part 2 loads configs/tiny.py as `make demo` does; the test then shrinks that config's step to 8 questions x
group 4 (from 32 x 8: one eighth of the rollouts and updates). The code path is the same -- rollout, the
flat-group filter, advantages, the mini-batched update, the weight hand-off, held-out evaluation, report
and plot -- only the batch is smaller."""

import dataclasses

import pytest

from memjax.cli import demo
from memjax.core import config

pytestmark = pytest.mark.e2e


def test_demo_runs(tmp_path, capsys, monkeypatch):
    load = config.load_config_file
    loaded = []

    def smaller(path):
        cfg = load(path)
        loaded.append(path)
        return dataclasses.replace(cfg, prompts_per_step=8, agent=dataclasses.replace(cfg.agent, group_size=4))

    monkeypatch.setattr(config, "load_config_file", smaller)
    assert demo.main(["--out", str(tmp_path / "demo"), "--max-new-tokens", "4", "--rl-steps", "2",
                      "--rl-heldout", "16"]) == 0
    assert [p.name for p in loaded] == ["tiny.py"]  # the demo read configs/tiny.py
    out = capsys.readouterr().out
    assert "bit-identical to the original: yes" in out and "foundation finished" in out
    assert "held-out accuracy" in out and "demo finished" in out and "step 2/2" in out
    assert (tmp_path / "demo" / "hf_roundtrip" / "config.json").is_file()
    assert (tmp_path / "demo" / "tiny" / "reward_curve.png").is_file()
    report = tmp_path / "demo" / "tiny" / "report.html"                 # the demo ends with the run's page
    assert report.is_file() and str(report) in out.replace("\n", "") and 'class="trace"' in report.read_text()
