"""One run per output directory: training, evaluation, LoCoMo and LongMemEval scoring refuse another kind's directory
in one line, before anything is loaded or written (memjax.core.outdir.claim_kind)."""

import json
from pathlib import Path

import pytest

from memjax.cli import evaluate, train
from memjax.core.outdir import KIND_MARK, dir_kind
from memjax.evaluation import locomo

REPO = Path(__file__).resolve().parents[3]
LOCOMO = REPO / "tests/fixtures/data/locomo_fixture.json"


@pytest.fixture
def training_dir(tmp_path):
    d = tmp_path / "train"
    (d / "checkpoints" / "1").mkdir(parents=True)
    (d / "run.json").write_text(json.dumps({"code": "abc", "config": {}}))
    (d / "metrics.jsonl").write_text('{"step": 1}\n')
    return d


def _files(d: Path) -> dict:
    return {str(p.relative_to(d)): p.read_bytes() for p in d.rglob("*") if p.is_file()}


def test_evaluation_and_scoring_refuse_a_training_dir(training_dir, tmp_path, capsys):
    before = _files(training_dir)
    assert evaluate.main([str(REPO / "configs/memagent/tiny_eval.py"), "--set", f"out_dir={training_dir}"]) == 2
    assert (f"out_dir={training_dir}: holds a training run (checkpoints/); python -m memjax.evaluate writes an "
            "evaluation run, into a directory of its own") in capsys.readouterr().err
    ans = tmp_path / "a.jsonl"
    from memjax.data.locomo import load_locomo

    ans.write_text("".join(json.dumps({"qid": q.qid, "answer": q.answer}) + "\n"
                           for c in load_locomo(LOCOMO).conversations for q in c.questions))
    assert locomo.main([str(LOCOMO), "--answers", str(ans), "--out", str(training_dir)]) == 2
    assert "holds a training run (checkpoints/); LoCoMo scoring writes a locomo run" in capsys.readouterr().err
    assert _files(training_dir) == before
    out = tmp_path / "scored"
    assert locomo.main([str(LOCOMO), "--answers", str(ans), "--out", str(out)]) == 0
    assert (out / KIND_MARK).read_text().strip() == "locomo" and dir_kind(out) == ("locomo", KIND_MARK)
    capsys.readouterr()
    assert train.main([str(REPO / "configs/tiny.py"), "--set", f"out_dir={out}"]) == 2
    assert (f"out_dir={out}: holds a locomo run (.memjax-kind); python -m memjax.train writes a training run"
            in capsys.readouterr().err)


def test_dir_kind_recognises_unmarked_dirs(tmp_path):
    (tmp_path / "e").mkdir()
    (tmp_path / "e" / "run.json").write_text('{"run_key": "x"}')
    (tmp_path / "l").mkdir()
    (tmp_path / "l" / "predictions.jsonl").write_text('{"question_id": "q"}\n')
    assert dir_kind(tmp_path / "e") == ("evaluation", "run.json")
    assert dir_kind(tmp_path / "l") == ("longmemeval", "predictions.jsonl")
    assert dir_kind(tmp_path / "none") is None
