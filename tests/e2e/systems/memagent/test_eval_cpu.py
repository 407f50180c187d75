"""`python -m memjax.evaluate configs/memagent/eval_cpu.py` as typed, from the repository root: the Table 2 pipeline
at N = 50 for 2 questions finishes with the cost line, per-batch progress, the table beside the paper's 7K column,
the plot and the report page."""

import json
from pathlib import Path

import pytest

from memjax.cli import evaluate

pytestmark = [pytest.mark.e2e, pytest.mark.slow(seconds=90)]

ROOT = Path(__file__).resolve().parents[4]


def test_the_cpu_sized_table_2_run_finishes(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(ROOT)  # the config's data_path is relative to the repository root, as documented
    out = tmp_path / "eval_cpu"
    assert evaluate.main(["configs/memagent/eval_cpu.py", "--set", f"out_dir={out}"]) == 0
    console = capsys.readouterr().out
    assert "cost: 1 length(s), 2 question(s) x 1 rollout(s): about" in console, console
    assert "N=50: items 2/2 done (" in console and "left at its " in console, console
    res = json.loads((out / "results.json").read_text())
    (row,) = res["rows"]
    assert res["complete"] and row["num_docs"] == 50 and row["samples"] == 2 and row["paper_tokens"] == "7K"
    assert 5000 < row["mean_tokens"] < 10000  # RULER-HotpotQA at 50 documents: the paper's ~7K tokens
    assert (out / "accuracy.png").is_file() and (out / "report.html").is_file()
