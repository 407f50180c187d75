"""`python -m memjax.evaluate` end to end on the committed HotpotQA excerpt with a tiny random model."""

import json
from pathlib import Path

from memjax import evaluate

DATA = Path(__file__).parent / "fixtures" / "data" / "hotpotqa_dev_excerpt.json"


def test_evaluate_writes_table_plot_and_traces(tmp_path):
    out = tmp_path / "eval"
    rc = evaluate.main(["--set", f"data_path={DATA}", "--set", "num_docs=10,12", "--set", "num_samples=2",
                        "--set", "engine.window=1024", "--set", "engine.page_size=16", "--set", "memagent.chunk_tokens=400",
                        "--set", "memagent.max_memory_tokens=8", "--set", "memagent.max_final_tokens=8",
                        "--set", "memagent.max_query_tokens=64", "--set", f"out_dir={out}"])
    assert rc == 0
    res = json.loads((out / "results.json").read_text())
    assert [r["num_docs"] for r in res["rows"]] == [10, 12]
    for r in res["rows"]:
        assert 0.0 <= r["sub_em"] <= 1.0 and r["samples"] == 2 and r["conversations"] >= 2 * 4
    traces = [json.loads(line) for line in (out / "traces.jsonl").read_text().splitlines()]
    assert len(traces) == 4 and all(len(t["memories"]) == t["chunks"] for t in traces)
    assert (out / "accuracy.png").stat().st_size > 1000 and "| N docs |" in (out / "results.md").read_text()


def test_evaluate_errors(tmp_path, capsys):
    assert evaluate.main(["--set", "num_samples=1"]) == 2
    assert "data_path is not set" in capsys.readouterr().err
    assert evaluate.main(["--set", f"data_path={tmp_path / 'none.json'}"]) == 2
