"""A result knows what it scored: inputs.json / results.json record the answers, data, policy, judge and metric
profile; a resume under other inputs is refused (or re-scored with rescore); answers are matched to questions."""

import json
from pathlib import Path

import pytest

from memjax.evaluation import locomo
from memjax.evaluation.provenance import digest

ROOT = Path(__file__).parents[3]
LOCOMO = ROOT / "tests/fixtures/data/locomo_fixture.json"
LME = ROOT / "tests/fixtures/data/longmemeval_fixture.json"


def _qids():
    from memjax.data.locomo import load_locomo

    return [(q.qid, q.answer) for c in load_locomo(LOCOMO).conversations for q in c.questions if q.category != 5]


def _write(path: Path, rows) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _err(capsys) -> str:
    return [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("error:")][0]


def test_digest_of_file_and_directory(tmp_path):
    import hashlib

    (tmp_path / "d").mkdir()
    f = tmp_path / "d" / "a.txt"
    f.write_text("x")
    h = hashlib.sha256(b"a.txt\0x").hexdigest()[:16]
    assert digest(f) == hashlib.sha256(b"a.txt\0x").hexdigest()[:16] and digest(tmp_path / "d") == h
    f.write_text("y")
    assert digest(f) != h and digest("random") == "random" and digest("") == ""


def test_locomo_answers_b_into_the_dir_of_answers_a_is_refused_or_rescored(tmp_path, capsys):
    a = _write(tmp_path / "A.jsonl", [{"qid": q, "answer": g} for q, g in _qids()])
    b = _write(tmp_path / "B.jsonl", [{"qid": q, "answer": "nothing"} for q, _ in _qids()])
    out = tmp_path / "o"
    base = [str(LOCOMO), "--out", str(out)]
    assert locomo.main([*base, "--answers", str(a)]) == 0
    res = json.loads((out / "results.json").read_text())
    assert res["inputs"]["answers"]["digest"] == digest(a) and res["inputs"]["data"]["digest"] == digest(LOCOMO)
    assert res["inputs"]["judge"] == "rule" and res["inputs"]["metrics"] == "memory_r2/f1=set"
    assert res["table"]["overall"]["J"] == 100.0
    capsys.readouterr()
    assert locomo.main([*base, "--answers", str(b)]) == 2
    assert f"holds scores of other inputs (answers file: {a} [{digest(a)}] -> {b} [{digest(b)}])" in _err(capsys)
    assert json.loads((out / "results.json").read_text())["table"]["overall"]["J"] == 100.0  # untouched
    assert locomo.main([*base, "--answers", str(b), "--rescore"]) == 0
    res = json.loads((out / "results.json").read_text())
    assert res["counts"]["resumed"] == 0 and res["counts"]["scored"] == 8 and res["table"]["overall"]["J"] < 50
    assert locomo.main([*base, "--answers", str(b)]) == 0  # the same inputs: resumed
    assert json.loads((out / "results.json").read_text())["counts"]["resumed"] == 8


@pytest.mark.parametrize("case,message", [
    ("none", "8 of 8 questions have no answer there (10 of its 10 ids match no question of the data file)"),
    ("two", "6 of 8 questions have no answer there (0 of its 2 ids match no question"),
    ("dup", "appears again with another answer"),
])
def test_locomo_answers_matched_to_questions(case, message, tmp_path, capsys):
    qs = _qids()
    rows = {"none": [{"qid": "x" + q, "answer": g} for q, g in qs],
            "two": [{"qid": q, "answer": g} for q, g in qs[:2]],
            "dup": [{"qid": q, "answer": g} for q, g in qs] + [{"qid": qs[0][0], "answer": "other"}]}[case]
    f = _write(tmp_path / "ans.jsonl", rows)
    assert locomo.main([str(LOCOMO), "--answers", str(f), "--out", str(tmp_path / "o")]) == 2
    assert message in _err(capsys)
    assert not (tmp_path / "o").exists()


def test_locomo_missing_answers_counted_in_results_md(tmp_path, capsys):
    qs = _qids()
    f = _write(tmp_path / "ans.jsonl", [{"qid": q, "answer": g} for q, g in qs[:7]] + [{"qid": qs[0][0], "answer": qs[0][1]}])
    out = tmp_path / "o"
    assert locomo.main([str(LOCOMO), "--answers", str(f), "--out", str(out)]) == 0
    line = ("answers: 7 of 8 questions answered; 1 missing (scored as empty answers), 0 ids matching no question, "
            "1 duplicate lines")
    assert line in capsys.readouterr().err and line in (out / "results.md").read_text()
    assert json.loads((out / "results.json").read_text())["answers_match"]["missing"] == 1


def test_longmemeval_answers_resume_under_other_answers_is_refused(tmp_path, capsys):
    from memjax.data.longmemeval import load_longmemeval
    from memjax.cli.evaluate import main

    qs = load_longmemeval(LME).questions
    a = _write(tmp_path / "A.jsonl", [{"question_id": q.question_id, "hypothesis": q.answer} for q in qs])
    b = _write(tmp_path / "B.jsonl", [{"question_id": q.question_id, "hypothesis": "no idea"} for q in qs])
    out = tmp_path / "o"
    argv = [str(ROOT / "configs/longmemeval_answers.py"), "--set", f"data_path={LME}", "--set", "judge=rule",
            "--set", f"out_dir={out}"]
    assert main([*argv, "--set", f"answers={a}"]) == 0
    assert json.loads((out / "results.json").read_text())["inputs"]["answers"]["digest"] == digest(a)
    capsys.readouterr()
    assert main([*argv, "--set", f"answers={b}"]) == 2
    assert "holds scores of other inputs (answers file:" in capsys.readouterr().err
    assert main([*argv, "--set", f"answers={b}", "--set", "rescore=true"]) == 0
    assert json.loads((out / "results.json").read_text())["counts"]["resumed"] == 0
    none = _write(tmp_path / "none.jsonl", [{"question_id": "x" + q.question_id, "hypothesis": "a"} for q in qs])
    capsys.readouterr()
    assert main([*argv, "--set", f"answers={none}", "--set", f"out_dir={tmp_path / 'n'}"]) == 2
    assert f"{len(qs)} of {len(qs)} questions have no answer there" in capsys.readouterr().err
