"""The LongMemEval harness: the official aggregates (per type, task-averaged, overall, abstention) on hand-checked
records, recall@k, `python -m memjax.evaluate configs/longmemeval_answers.py` on the fixture, resume, a failed judge
call left unscored and asked again on the re-run (never a score), a torn last line, a failing predictor."""

import json
from pathlib import Path

import pytest

from memjax.data.longmemeval import load_longmemeval
from memjax.evaluation.longmemeval import LongMemEvalConfig, evaluate_longmemeval
from memjax.evaluation.longmemeval_judge import LmeVerdict, RuleLmeJudge
from memjax.evaluation.longmemeval_scores import qa_table, recall_at_k, retrieval_metrics

ROOT = Path(__file__).parents[3]
FIXTURE = ROOT / "tests" / "fixtures" / "data" / "longmemeval_fixture.json"
QS = load_longmemeval(FIXTURE).questions


def test_qa_table_hand_computed():
    recs = [{"question_type": "single-session-user", "label": True, "abstention": False},
            {"question_type": "single-session-user", "label": False, "abstention": True},
            {"question_type": "multi-session", "label": True, "abstention": False},
            {"question_type": "multi-session", "label": None, "abstention": False},   # judge failed: unscored
            {"question_type": "temporal-reasoning", "label": True, "abstention": True}]
    t = qa_table(recs)
    assert t["single-session-user"] == {"accuracy": 50.0, "n": 2, "unscored": 0}
    assert t["multi-session"] == {"accuracy": 100.0, "n": 1, "unscored": 1}
    assert t["overall"] == {"accuracy": 75.0, "n": 4, "unscored": 1}
    assert t["task-averaged"]["accuracy"] == round((50 + 100 + 100) / 3, 2) and t["task-averaged"]["n"] == 3
    assert t["abstention"] == {"accuracy": 50.0, "n": 2, "unscored": 0} and "knowledge-update" not in t


def test_recall():
    assert recall_at_k(["a", "b", "c"], ["b", "c"], 2) == (1.0, 0.0)
    assert recall_at_k(["a", "b", "c"], ["b", "c"], 3) == (1.0, 1.0) and recall_at_k([], ["a"], 5) == (0.0, 0.0)
    m = retrieval_metrics(["D3:1", "D3:2", "D1:1", "D2:4"], ["D1:1", "D2:1"], ["D1", "D2"], [2, 3])
    assert m["turn_recall_any@2"] == 0.0 and m["turn_recall_any@3"] == 1.0 and m["turn_recall_all@3"] == 0.0
    assert m["session_recall_any@2"] == 1.0 and m["session_recall_all@2"] == 0.0 and m["session_recall_all@3"] == 1.0


def _hyp(tmp_path):
    right = {"mj_ssu_1": "a beagle", "mj_ms_1": "3", "mj_ssu_2_abs": "The information provided is not enough."}
    p = tmp_path / "hyp.jsonl"
    p.write_text("".join(json.dumps({"question_id": q.question_id, "hypothesis": right.get(q.question_id, "no idea")})
                         + "\n" for q in QS[:-1]))                   # the last question has no hypothesis
    return p


def test_answers_config_end_to_end_and_resume(tmp_path):
    from memjax.cli.evaluate import main

    out = tmp_path / "ev"
    argv = [str(ROOT / "configs" / "longmemeval_answers.py"), "--set", f"data_path={FIXTURE}", "--set",
            f"answers={_hyp(tmp_path)}", "--set", f"out_dir={out}", "--set", "judge=rule"]
    assert main(argv) == 0
    res = json.loads((out / "results.json").read_text())
    t = res["table"]
    assert t["single-session-user"]["accuracy"] == 100.0 and t["multi-session"]["accuracy"] == 100.0
    assert t["temporal-reasoning"]["accuracy"] == 0.0 and t["overall"] == {"accuracy": 37.5, "n": 8, "unscored": 0}
    assert t["task-averaged"]["accuracy"] == round(200 / 6, 2) and t["abstention"]["accuracy"] == 50.0
    assert res["counts"]["no_answer"] == 1 and res["judge"] == "rule-based (not an LLM)"
    assert res["environment"]["python"] and res["environment"]["packages"]["numpy"]
    md = (out / "results.md").read_text()
    assert "| accuracy | 100.00 | 0.00 | 0.00 | 100.00 | 0.00 | 0.00 | 33.33 | 37.50 | 50.00 |" in md
    html = (out / "report.html").read_text()                        # the report page: the per-type table
    assert "task-averaged" in html and "mj_tr_2_abs" in html and "F1 over token" not in html
    assert main(argv) == 0                                          # resumed: nothing new
    again = json.loads((out / "results.json").read_text())
    assert again["counts"]["resumed"] == 8 and again["counts"]["predicted"] == 0 and again["table"] == t
    assert len((out / "predictions.jsonl").read_text().splitlines()) == 8


class FlakyJudge:
    """The rule judge, except that calls for `fail` question texts fail (label None) while `down`."""

    name = "flaky"

    def __init__(self, fail):
        self.fail, self.down, self.asked = fail, True, []

    def judge(self, items):
        items = list(items)
        self.asked += [it[1] for it in items]
        ok = RuleLmeJudge().judge(items)
        return [LmeVerdict(None, "", "judge request failed: refused") if self.down and it[1] in self.fail else v
                for it, v in zip(items, ok)]


def test_failed_judge_call_is_never_a_score_and_is_asked_again(tmp_path):
    calls = []

    def predictor(qs):
        calls.extend(q.question_id for q in qs)
        return [{"answer": q.answer} for q in qs]                   # every hypothesis is the gold answer

    judge = FlakyJudge({QS[0].question, QS[3].question})
    res = evaluate_longmemeval(QS, predictor, judge, tmp_path, batch_size=3, chart_png=False, progress=lambda m: None)
    t = res["table"]
    assert res["counts"]["judge_failures"] == 2 and t["overall"]["unscored"] == 2 and t["overall"]["n"] == 6
    assert t["multi-session"] == {"accuracy": None, "n": 0, "unscored": 1}     # never a score
    lines = [json.loads(x) for x in (tmp_path / "predictions.jsonl").read_text().splitlines()]
    failed = [x for x in lines if x["label"] is None]
    assert [x["question_id"] for x in failed] == [QS[0].question_id, QS[3].question_id]
    assert all("refused" in x["judge_error"] for x in failed)
    judge.down, judge.asked, n_calls = False, [], len(calls)
    res = evaluate_longmemeval(QS, predictor, judge, tmp_path, chart_png=False, progress=lambda m: None)
    assert len(calls) == n_calls and sorted(judge.asked) == sorted([QS[0].question, QS[3].question])
    assert res["counts"]["rejudged"] == 2 and res["counts"]["judge_failures"] == 0
    assert res["table"]["overall"] == {"accuracy": res["table"]["overall"]["accuracy"], "n": 8, "unscored": 0}
    assert res["table"]["multi-session"]["n"] == 1


def test_torn_line_and_failing_predictor(tmp_path):
    def broken(qs):
        raise RuntimeError("engine out of memory")

    res = evaluate_longmemeval(QS[:2], broken, RuleLmeJudge(), tmp_path, chart_png=False, progress=lambda m: None)
    assert res["counts"]["predictor_errors"] == 2
    lines = [json.loads(x) for x in (tmp_path / "predictions.jsonl").read_text().splitlines()]
    assert all(x["hypothesis"] is None and "out of memory" in x["error"] and x["label"] is False for x in lines)
    with (tmp_path / "predictions.jsonl").open("a") as fh:
        fh.write('{"question_id": "mj_ssp')                          # a crash mid-write
    res = evaluate_longmemeval(QS[:3], lambda qs: [{"answer": "x"} for _ in qs], RuleLmeJudge(), tmp_path,
                               chart_png=False, progress=lambda m: None)
    assert res["counts"]["torn_lines"] == 1 and res["counts"]["resumed"] == 2 and res["counts"]["predicted"] == 1
    assert len((tmp_path / "predictions.jsonl").read_text().splitlines()) == 3


@pytest.mark.parametrize("changes,message", [({"system": "mem0"}, "system"), ({"judge": "gpt"}, "judge"),
                                             ({"question_types": ("open-domain",)}, "question_types"),
                                             ({"recall_k": (0,)}, "recall_k"), ({"judge": "engine"}, "judge_hf_path"),
                                             ({"batch_size": 0}, "batch_size"), ({"limit": 0}, "limit")])
def test_config_validation(changes, message):
    with pytest.raises(ValueError, match=message):
        LongMemEvalConfig(**changes)


def test_check_and_bad_paths(tmp_path, capsys):
    from memjax.cli.evaluate import main

    cfg = str(ROOT / "configs" / "longmemeval_answers.py")
    hyp = _hyp(tmp_path)
    assert main([cfg, "--set", f"data_path={FIXTURE}", "--set", f"answers={hyp}", "--set",
                 'question_types=["multi-session","temporal-reasoning"]', "--set", "max_missing=1", "--check"]) == 0
    out = capsys.readouterr().out
    assert "3 questions (1 abstention)" in out and "check: ok" in out
    assert main([cfg, "--set", "data_path=/nope.json", "--set", f"answers={hyp}"]) == 2
    assert "data_path='/nope.json': LongMemEval file not found" in capsys.readouterr().err
