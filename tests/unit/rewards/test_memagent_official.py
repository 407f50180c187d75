"""memagent_official equals MemAgent's official reward and ruler_hqa scoring on the golden fixtures."""

import json
from pathlib import Path

import pytest

from memjax.rewards.boxed import memagent_reward
from memjax.rewards.memagent_official import memagent_reward_official, ruler_hqa_item, ruler_hqa_summary

FIX = json.loads((Path(__file__).resolve().parents[2] / "fixtures" / "metric_goldens_memagent.json")
                 .read_text(encoding="utf-8"))


def test_fixture_provenance_and_size():
    assert FIX["meta"]["repo"] == "BytedTsinghua-SIA/MemAgent" and FIX["meta"]["commit"] == "76b7a65"
    assert len(FIX["cases"]) >= 1000


def test_reward_equals_official():
    bad = [(c["output"], c["answers"], c["reward"]) for c in FIX["cases"]
           if memagent_reward_official(c["output"], c["answers"]) != c["reward"]]
    assert not bad, f"{len(bad)} mismatches, first: {bad[:3]}"


def test_eval_item_equals_official():
    bad = []
    for c in FIX["cases"]:
        it = ruler_hqa_item(c["output"], c["answers"])
        if "eval_error" in c:
            ok = it.crashed and it.f1 == it.em == it.sub_em == 0.0
        elif c.get("eval_skipped"):
            ok = it.skipped
        else:
            ok = (not it.crashed and it.pred == c["pred"]
                  and all(abs(getattr(it, k) - c[k]) <= 1e-12 for k in ("f1", "em", "sub_em")))
        if not ok:
            bad.append((c, it))
    assert not bad, f"{len(bad)} mismatches, first: {bad[:2]}"
    assert sum("eval_error" in c for c in FIX["cases"]) > 0


def test_official_reward_keeps_the_box_and_think_quirks():
    assert memagent_reward_official("\\fbox{paris}", ["Paris"]) == 0.0 and memagent_reward("\\fbox{paris}", ["Paris"]) == 1.0
    assert memagent_reward_official("\\boxed paris$ then \\boxed{rome}", ["paris"]) == 1.0  # space form wins
    assert memagent_reward_official("\\boxed\n{paris}", ["paris"]) == 0.0
    it = ruler_hqa_item("<think>\\boxed{x}</think> \\boxed{the}", ["Paris", "other"])
    assert it.pred == "the" and it.f1 == 0.0 and it.sub_em == 1.0
    assert ruler_hqa_item("\\boxed{Paris}", ["Rome", "Paris"]).em == 0.0          # answers[0] only
    assert ruler_hqa_item("\\boxed{x y z}", ["x y w"]).f1 == 0.67                  # rounded to 2 decimals
    s = ruler_hqa_summary([ruler_hqa_item("\\boxed{Paris}", ["Paris"]), ruler_hqa_item("", ["x"]),
                           ruler_hqa_item("\\fbox{x}", ["x"])])
    assert s == {"f1": 50.0, "em": 50.0, "sub_em": 50.0, "crashed": 1.0}
    with pytest.raises(ValueError):
        ruler_hqa_summary([ruler_hqa_item("", ["x"])])
