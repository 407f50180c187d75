"""LoCoMo harness with a scripted predictor: incremental resumable JSONL, table by hand, chart, CLI."""

import json
from pathlib import Path

import pytest

from memjax.data.locomo import load_locomo
from memjax.data.locomo_splits import split_questions
from memjax.evaluation.locomo import evaluate_locomo, main
from memjax.rewards.locomo import RuleBasedJudge

FIXTURE = Path(__file__).parents[2] / "fixtures" / "data" / "locomo_fixture.json"


def _questions():
    return split_questions(load_locomo(FIXTURE), "memory_r1")["train"]      # conv-26, categories 1-4: 8 questions


SCRIPT = {0: "Buddy", 1: "in 2022", 2: {"answer": "two", "memory_dia_ids": ["D1:1"]}, 3: "his first painting",
          4: "Porto", 5: None, 6: "sunny", 7: "boom"}


def _predictor(calls):
    def predict(q):
        calls.append(q.qid)
        out = SCRIPT[q.index]
        if out == "boom":
            raise RuntimeError("system bug")
        return out
    return predict


def test_scripted_run_table_resume_and_chart(tmp_path):
    qs = _questions()
    assert len(qs) == 8
    calls = []
    res = evaluate_locomo(qs, _predictor(calls), RuleBasedJudge(), tmp_path, title="fixture")
    lines = [json.loads(x) for x in (tmp_path / "predictions.jsonl").read_text().splitlines()]
    assert [x["qid"] for x in lines] == [q.qid for q in qs] and len(calls) == 8
    by = {x["qid"]: x for x in lines}
    assert by["conv-26#7"]["error"] == "RuntimeError: system bug" and by["conv-26#7"]["j"] == 0.0
    assert by["conv-26#1"]["f1_set"] == pytest.approx(2 / 3)          # {in, 2022} vs {2022}
    t = res["table"]
    # single-hop (cat 4): #0 Buddy (1), #3 exact (1), #5 None (0), #6 sunny (1) -> F1 75 %, J 75 %
    assert t["single-hop"] == {"n": 4, "F1": 75.0, "B1": 75.0, "J": 75.0, "M-Fail": None}
    # multi-hop (cat 1): #2 "two" vs "2" (0), #7 error (0); M-Fail only on #2: evidence D1:1, D2:1, memory D1:1 -> 50 %
    assert t["multi-hop"]["F1"] == 0.0 and t["multi-hop"]["M-Fail"] == 50.0
    assert t["temporal"]["n"] == 1 and t["open-domain"]["F1"] == 0.0
    assert t["overall"]["n"] == 8 and t["overall"]["F1"] == pytest.approx(100 * (1 + 2 / 3 + 1 + 1) / 8, abs=0.01)
    assert res["counts"]["no_answer"] == 2 and res["counts"]["predictor_errors"] == 1
    assert (tmp_path / "scores.png").stat().st_size > 1000
    md = (tmp_path / "results.md").read_text()
    assert "| J | 75.00 |" in md and "rule-based" in md

    # crash mid-write: a torn last line is dropped and that question re-done; finished ones are not re-asked
    text = (tmp_path / "predictions.jsonl").read_text().splitlines()
    (tmp_path / "predictions.jsonl").write_text("\n".join(text[:5]) + "\n" + text[5][:20])
    calls.clear()
    res2 = evaluate_locomo(qs, _predictor(calls), RuleBasedJudge(), tmp_path, chart=False)
    assert calls == [q.qid for q in qs[5:]] and res2["counts"]["torn_lines"] == 1
    assert res2["counts"]["resumed"] == 5 and res2["table"] == t
    assert len((tmp_path / "predictions.jsonl").read_text().splitlines()) == 8


def test_refuses_category5_and_cli(tmp_path, capsys):
    cat5 = [q for q in load_locomo(FIXTURE).conversation("conv-26").questions if q.category == 5]
    with pytest.raises(ValueError, match="category 5"):
        evaluate_locomo(cat5, lambda q: "x", RuleBasedJudge(), tmp_path)
    ans = tmp_path / "answers.jsonl"
    ans.write_text(json.dumps({"qid": "conv-30#0", "answer": "Porto"}) + "\n")
    rc = main([str(FIXTURE), "--split", "memory_r1", "--part", "validation", "--answers", str(ans),
               "--out", str(tmp_path / "cli"), "--max-missing", "1"])  # 1 of 2 answered: allowed here
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    assert out["overall"]["n"] == 2 and out["overall"]["J"] == 50.0 and out["counts"]["no_answer"] == 1
    assert out["report"] == str(tmp_path / "cli" / "report.html") and Path(out["report"]).is_file()
    assert main([str(FIXTURE), "--split", "nope", "--answers", str(ans), "--out", str(tmp_path / "x")]) == 2
    assert "unknown LoCoMo split" in capsys.readouterr().err


def test_batch_predictor_chunks_and_failures(tmp_path):
    qs = _questions()
    chunks = []

    def batch(chunk):
        chunks.append([q.qid for q in chunk])
        if len(chunks) == 2:
            raise RuntimeError("engine died")
        return [SCRIPT[q.index] if SCRIPT[q.index] != "boom" else None for q in chunk]

    res = evaluate_locomo(qs, None, RuleBasedJudge(), tmp_path, batch_predictor=batch, batch_size=3, chart=False)
    assert [len(c) for c in chunks] == [3, 3, 2]
    lines = [json.loads(x) for x in (tmp_path / "predictions.jsonl").read_text().splitlines()]
    assert [x["qid"] for x in lines] == [q.qid for q in qs]
    assert [x.get("error") for x in lines[3:6]] == ["RuntimeError: engine died"] * 3
    assert res["counts"]["predictor_errors"] == 3 and res["table"]["overall"]["n"] == 8
    with pytest.raises(ValueError, match="exactly one"):
        evaluate_locomo(qs, lambda q: "x", RuleBasedJudge(), tmp_path, batch_predictor=batch)


def test_memjax_evaluate_runs_a_locomo_config(tmp_path, capsys):
    """`python -m memjax.evaluate configs/locomo_answers.py --set ...` dispatches on the config type, locks
    out_dir, and gives one-line errors (exit 2) for a missing answers file or an unknown system."""
    from memjax.cli.evaluate import main as evaluate_main

    cfg = str(Path(__file__).parents[3] / "configs" / "locomo_answers.py")
    ans = tmp_path / "answers.jsonl"
    ans.write_text(json.dumps({"qid": "conv-30#0", "answer": "Porto"}) + "\n")
    sets = ["--set", f"data_path={FIXTURE}", "--set", "part=validation", "--set", f"out_dir={tmp_path / 'ev'}",
            "--set", "max_missing=1"]  # 1 of 2 questions answered: allowed here
    assert evaluate_main([cfg, *sets, "--set", f"answers={ans}"]) == 0
    res = json.loads((tmp_path / "ev" / "results.json").read_text())
    assert res["table"]["overall"]["n"] == 2 and res["table"]["overall"]["J"] == 50.0
    assert res["environment"]["packages"]["nltk"] == "3.9.1" and res["environment"]["cpu"]  # the metrics' versions
    assert (tmp_path / "ev" / "predictions.jsonl").is_file() and (tmp_path / "ev" / "scores.png").is_file()
    assert evaluate_main([cfg, *sets, "--set", f"answers={tmp_path / 'none.jsonl'}"]) == 2
    assert "answers=" in capsys.readouterr().err
    assert evaluate_main([cfg, *sets, "--set", "system=sumer"]) == 2
    assert "LocomoEvalConfig.system" in capsys.readouterr().err
