"""The shipped MemAgent configs train and score with MemAgent's official code by default (issue 49, item 1).

The golden corpus (tests/fixtures/metric_goldens_memagent.json) holds outputs scored by the official functions
(MemAgent @76b7a65 `compute_score` and ruler_hqa.py); here they go through the objects the shipped configs build:
the training workflow of configs/memagent/train.py (MemAgentSystem.workflow) and the metric profile named by
configs/memagent/eval.py. A default that drifts back to memjax's lenient reader fails here.
"""

import dataclasses
import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from memjax.core.config import load_config_file
from memjax.core.tokenizer import _default as shipped_tokenizer
from memjax.evaluation.profiles import get_profile
from memjax.rewards import memagent_reward
from memjax.systems.memagent.workflow import MemAgent

ROOT = Path(__file__).resolve().parents[4]
FIX = json.loads((ROOT / "tests" / "fixtures" / "metric_goldens_memagent.json").read_text(encoding="utf-8"))
HOTPOT = ROOT / "tests" / "fixtures" / "data" / "hotpotqa_dev_excerpt.json"


@pytest.fixture(scope="module")
def train_workflow():
    from memjax.systems import build

    cfg = load_config_file(ROOT / "configs" / "memagent" / "train.py")
    agent = dataclasses.replace(cfg.agent, data=dataclasses.replace(cfg.agent.data, path=str(HOTPOT)))
    system = build(agent, seed=0)
    engine = SimpleNamespace(config=cfg.engine)  # the workflow reads only the engine's window before a run
    return system.workflow(engine, shipped_tokenizer(), train=True)


def test_shipped_training_reward_is_the_official_one(train_workflow):
    assert isinstance(train_workflow, MemAgent) and train_workflow.cfg.reward == "official"
    bad = [(c["output"], c["answers"], c["reward"]) for c in FIX["cases"]
           if train_workflow.reward_fn(c["output"], c["answers"]) != c["reward"]]
    assert not bad, f"{len(bad)} of {len(FIX['cases'])} differ from the official compute_score, first: {bad[:3]}"
    # the corpus does tell the readers apart: the lenient one (a named option) differs on some cases
    assert sum(memagent_reward(c["output"], c["answers"]) != c["reward"] for c in FIX["cases"]) > 50


def test_shipped_evaluation_scores_items_as_the_official_script():
    cfg = load_config_file(ROOT / "configs" / "memagent" / "eval.py")
    score = get_profile(cfg.metrics, "boxed").score
    bad = []
    for c in FIX["cases"]:
        if c.get("eval_skipped"):
            continue
        s = score(c["output"], c["answers"])
        want = ({"f1": 0.0, "em": 0.0, "sub_em": 0.0, "crashed": 1.0} if "eval_error" in c else
                {"f1": c["f1"], "em": c["em"], "sub_em": c["sub_em"], "crashed": 0.0})
        if any(abs(s[k] - v) > 1e-12 for k, v in want.items()):
            bad.append((c, s))
    assert not bad, f"{len(bad)} mismatches, first: {bad[:2]}"


def test_lenient_reward_is_a_named_option():
    from memjax.systems.memagent.workflow import REWARDS, MemAgentConfig

    assert REWARDS[MemAgentConfig(reward="lenient").reward] is memagent_reward
    with pytest.raises(ValueError, match="MemAgentConfig.reward"):
        MemAgentConfig(reward="strict")
