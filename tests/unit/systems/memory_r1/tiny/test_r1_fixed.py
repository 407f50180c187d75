"""Fixed-policy managers of the tiny Memory-R1 task run through the same workflow and evaluate_r1 as a model: each
policy emits its op on every prompt, and the measures follow from the task's rules (ADD-only right exactly on new
people and repeats, `update 0` scores the task's reward everywhere but loses other people's records, the
subject-match rule is right on every question)."""

import numpy as np
import pytest

from memjax.agents import run_workflow
from memjax.systems.memory_r1.tiny.fixed import POLICIES, FixedManagerEngine, parse_prompt
from memjax.systems.memory_r1.tiny.task import (HELDOUT_SEED, R1TaskConfig, TinyR1Workflow, evaluate_r1, make_r1_split, prompt_text,
                                 r1_tokenizer)


def test_parse_prompt():
    s = {"memory": [("ann", "rome"), ("bob", "oslo")], "fact": "bob gone ."}
    assert parse_prompt(prompt_text(s)) == (["ann", "bob"], "bob")
    assert parse_prompt("<user> " + prompt_text(s) + " <end> <assistant>") == (["ann", "bob"], "bob")


def test_fixed_policies_through_the_workflow():
    tok = r1_tokenizer()
    samples = make_r1_split(R1TaskConfig(), HELDOUT_SEED, 64)
    cases = np.asarray([s["case"] for s in samples])
    for name in POLICIES:
        res = run_workflow(FixedManagerEngine(tok, name), TinyR1Workflow(tok, temperature=0.0), samples)
        outs = [t["output"] for t in res.traces]
        assert res.stats["invalid_ops"] == 0
        if name in ("add_only", "none_only", "update_0"):
            assert set(outs) == {name.replace("_only", "").replace("_", " ")}
    ev = {name: evaluate_r1(FixedManagerEngine(tok, name), tok, samples, sampled=2) for name in POLICIES}
    assert ev["add_only"]["em"] == pytest.approx(np.isin(cases, ["new", "same"]).mean())
    assert ev["none_only"]["em"] == pytest.approx((cases == "same").mean())
    assert ev["update_0"]["em"] == 1.0 and ev["update_0"]["em_bank"] < 0.9
    assert ev["update_subject"]["em"] == ev["update_subject"]["em_bank"] == 1.0
    for e in ev.values():                                                   # deterministic: sampled == greedy
        assert e["em_sampled"] == pytest.approx(e["em"]) and e["em_bank_sampled"] == pytest.approx(e["em_bank"])
    with pytest.raises(ValueError, match="policy"):
        FixedManagerEngine(tok, "delete_all")
