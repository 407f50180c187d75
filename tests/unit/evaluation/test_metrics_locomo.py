"""LoCoMo's official per-QA F1 (task_eval/evaluation.py) reproduced on golden pairs from the official code."""

import json
from pathlib import Path

import pytest

from memjax.evaluation.metrics_locomo import locomo_normalize, locomo_qa_f1

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "metric_goldens_locomo.json"


def test_locomo_f1_matches_official_goldens():
    data = json.loads(FIX.read_text(encoding="utf-8"))
    meta, cases = data["meta"], data["cases"]
    assert meta["repo"] == "snap-research/locomo" and meta["commit"] == "9228632"
    assert len(cases) >= 1000 and {c["category"] for c in cases} == {1, 2, 3, 4}
    assert len({c["gold"] for c in cases}) >= 250                  # a few hundred real LoCoMo QA golds
    bad = [(c["pred"], c["gold"], c["category"], c["f1"], got) for c in cases
           if abs((got := locomo_qa_f1(c["pred"], c["gold"], c["category"])) - c["f1"]) > 1e-12]
    assert not bad, f"{len(bad)} mismatches, first: {bad[:3]}"


def test_locomo_quirks():
    assert locomo_normalize("Tom, Jerry and the Cat!") == "tom jerry cat"
    assert locomo_qa_f1("running dogs", "the dog runs") == 1.0                    # stemmed
    assert locomo_qa_f1("3 3 3 years", "3 years") == pytest.approx(2 * 0.5 * 1 / 1.5)   # multiset, not sets
    assert locomo_qa_f1("", "") == 0.0 and locomo_qa_f1(None, "x") == 0.0
    # category 1: mean over gold parts of the best predicted part; without it, one bag of words
    assert locomo_qa_f1("hiking", "hiking, swimming", 1) == 0.5
    assert locomo_qa_f1("hiking", "hiking, swimming", 4) == pytest.approx(2 / 3)
    assert locomo_qa_f1("paris", "Paris; or London", 3) == 1.0 and locomo_qa_f1("paris", "Paris; or London", 4) < 1
    # the regex module's word boundary: a combining mark is a word character there, '²' is not
    assert locomo_normalize("the\u0301 x") == "the\u0301 x" and locomo_normalize("a\u00b2") == "\u00b2"

