"""Metric profiles equal the official code's values on the golden fixtures (made by scripts/gen_metric_goldens.py)."""

import json
from pathlib import Path

import pytest

from memjax.evaluation.profiles import PROFILES, get_profile

FIX = Path(__file__).resolve().parents[2] / "fixtures"


def _cases(name):
    data = json.loads((FIX / f"metric_goldens_{name}.json").read_text(encoding="utf-8"))
    return data["meta"], data["cases"]


def test_memory_r2_matches_official_rema():
    meta, cases = _cases("memory_r2")
    assert meta["repo"] == "ahmedehabb/Memory-R2" and meta["commit"] == "357b4ec"
    assert len(cases) >= 1000
    prof = get_profile("memory_r2")
    bad = [(c["pred"], c["gold"], k, c[k], got) for c in cases for k, fn in (("f1", prof.f1), ("bleu1", prof.bleu1))
           if abs((got := fn(c["pred"], c["gold"])) - c[k]) > 1e-12]
    assert not bad, f"{len(bad)} mismatches, first: {bad[:3]}"


def test_memory_r2_profile_keeps_the_official_token_and_empty_answer_quirks():
    p = get_profile("memory_r2")
    assert p.f1("3 3 3 years", "3 years") == pytest.approx(2 / 3)
    assert p.bleu1("The 7 May, 2023.", "7 May 2023") == 1.0
    assert p.f1("", "") == 1.0 and p.f1("x", "") == 0.0 and p.bleu1("", "x") == 0.0
    assert p.f1(None, "x") == 0.0
    # the lenient memjax profile differs on exactly these
    m = get_profile("memjax")
    assert m.f1("3 3 3 years", "3 years") == 1.0 and m.bleu1("The 7 May, 2023.", "7 May 2023") == 0.5


def test_unknown_profile_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown"):
        get_profile("nope")
    assert {"memory_r2", "memjax"} <= set(PROFILES)


def test_boxed_profiles_and_kinds():
    off, len_ = get_profile("memagent", "boxed"), get_profile("memagent_lenient", "boxed")
    assert off.score("\\fbox{Paris}", ["Paris"])["crashed"] == 1.0 and off.score("\\fbox{Paris}", ["Paris"])["em"] == 0
    assert len_.score("\\fbox{Paris}", ["Paris"])["em"] == 1.0
    assert off.score("\\boxed{Paris}", ["Rome", "Paris"])["em"] == 0.0        # answers[0] only
    assert len_.score("\\boxed{Paris}", ["Rome", "Paris"])["em"] == 1.0
    with pytest.raises(ValueError, match="boxed profile"):
        get_profile("memory_r2", "boxed")


def test_configs_name_and_check_the_profile():
    from memjax.cli.evaluate import EvalConfig
    from memjax.evaluation.locomo import LocomoEvalConfig
    from memjax.evaluation.locomo_table import score_table
    from memjax.systems.memagent.length_eval import markdown

    assert EvalConfig().metrics == "memagent" and LocomoEvalConfig().metrics == "memory_r2"
    with pytest.raises(ValueError, match="EvalConfig.metrics='memory_r2'"):
        EvalConfig(metrics="memory_r2")
    with pytest.raises(ValueError, match="LocomoEvalConfig.metrics='memagent'"):
        LocomoEvalConfig(metrics="memagent")
    rec = {"category": 4, "prediction": "3 3 3 years", "gold": "3 years", "f1_set": 1.0, "b1": 0.25, "j": 1.0,
           "evidence": []}
    assert score_table([rec], metrics="memjax")["overall"]["F1"] == 100.0
    t = score_table([rec], metrics="memory_r2")["overall"]
    assert t["F1"] == pytest.approx(100 * 2 / 3, abs=0.01) and t["B1"] == pytest.approx(50.0, abs=0.01)
    assert "`memagent`" in markdown([], "memagent")


def test_locomo_profile_in_the_table():
    from memjax.evaluation.locomo import LocomoEvalConfig
    from memjax.evaluation.locomo_table import score_table, table_markdown as _markdown

    assert get_profile("locomo").bleu1 is None and LocomoEvalConfig(metrics="locomo").metrics == "locomo"
    recs = [{"category": 1, "prediction": "hiking", "gold": "hiking, swimming", "f1_set": 1.0, "b1": 1.0, "j": 1.0,
             "evidence": []},
            {"category": 4, "prediction": "running dogs", "gold": "the dog runs", "f1_set": 0.0, "b1": 0.0, "j": 0.0,
             "evidence": []}]
    t = score_table(recs, metrics="locomo")
    assert t["multi-hop"]["F1"] == 50.0 and t["single-hop"]["F1"] == 100.0 and t["overall"]["F1"] == 75.0
    assert t["overall"]["B1"] is None                      # LoCoMo's evaluation computes no BLEU
    assert "| B1 | — |" in _markdown(t, "x", "set", "locomo")
