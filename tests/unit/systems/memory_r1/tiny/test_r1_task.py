"""The tiny Memory-R1 task: generation, the op grammar through apply_mem0, the frozen reader, and the workflow on a
scripted engine (the correct op scores 1, the classic mistakes 0, garbage is no operation and counted), and the
bank questions (every person of the bank asked) that catch an op overwriting another person's record."""

import numpy as np
import pytest

from memjax.agents import run_workflow
from memjax.systems.memory_r1.tiny.task import (CASES, R1_WORDS, R1TaskConfig, TinyR1Workflow, bank_accuracy, bank_of,
                                 bank_questions, make_r1_sample, parse_op, prompt_text, r1_tokenizer, read)
from memjax.memory import apply_mem0, mem0_view

from scripted_engine import ScriptedEngine


def _apply(sample, op):
    bank = bank_of(sample)
    obj = parse_op(op, sample["fact"])
    if obj is not None:
        apply_mem0(bank, obj, mem0_view(list(bank))[1])
    return read(bank, sample["key"])


def test_vocabulary_and_samples():
    tok = r1_tokenizer()
    assert len(R1_WORDS) == len(set(R1_WORDS)) <= 64
    cfg = R1TaskConfig()
    samples = [make_r1_sample(cfg, 1, i) for i in range(400)]
    assert make_r1_sample(cfg, 1, 7) == samples[7]
    freq = {c: np.mean([s["case"] == c for s in samples]) for c in CASES}
    assert all(abs(freq[c] - p) < 0.08 for c, p in zip(CASES, cfg.case_probs))
    assert 0.3 < np.mean([s["teacher_op"] == s["op"] for s in samples if s["case"] != "same"]) < 0.5
    for s in samples:
        text = prompt_text(s)
        assert tok.decode(tok.encode(text)) == text and len(tok.apply_chat_template([{"role": "user", "content": text}])) <= 26
        assert _apply(s, s["op"]) == s["answer"]                               # the correct op always scores
        if s["case"] != "same":
            assert _apply(s, {"new": "none", "move": "add", "gone": "none"}[s["case"]]) != s["answer"]
        assert _apply(s, "update 9") == _apply(s, "none") and parse_op("add 0", s["fact"]) is None
    with pytest.raises(ValueError, match="case_probs"):
        R1TaskConfig(case_probs=(0.5, 0.5, 0.5, 0.0))


def test_workflow_rewards_and_counts():
    tok = r1_tokenizer()
    samples = [make_r1_sample(R1TaskConfig(), 3, i) for i in range(12)]
    by_prompt = {prompt_text(s): s for s in samples}

    def reply(ops):
        def f(text):
            s = by_prompt[text.split("<user> ", 1)[1].split(" <end>")[0]]
            return ops(s)
        return f

    good = run_workflow(ScriptedEngine(tok, reply(lambda s: s["op"])), TinyR1Workflow(tok), samples)
    assert good.rewards == [1.0] * 12 and good.stats["correct_op"] == 1.0 and good.stats["invalid_ops"] == 0
    assert good.batch.num_rows == 12
    bad = run_workflow(ScriptedEngine(tok, reply(lambda s: "update update")), TinyR1Workflow(tok), samples)
    assert bad.stats["invalid_ops"] == 12
    assert bad.rewards == [float(read(bank_of(s), s["key"]) == s["answer"]) for s in samples]   # no operation


def test_bank_questions_catch_overwriting_another_record():
    tok = r1_tokenizer()
    s = {"memory": [("ann", "rome"), ("bob", "oslo")], "fact": "cal in lima .", "key": "cal", "answer": "lima",
         "case": "new", "op": "add", "question": "where is cal ?", "teacher_op": "add"}
    assert bank_questions(s) == [("ann", "rome"), ("bob", "oslo"), ("cal", "lima")]
    ops = {"add": 1.0, "update 0": 2 / 3, "none": 2 / 3}                  # update 0 loses ann, none loses cal
    for op, acc in ops.items():
        bank = bank_of(s)
        apply_mem0(bank, parse_op(op, s["fact"]), mem0_view(list(bank))[1])
        assert bank_accuracy(bank, s) == pytest.approx(acc)
    # the task's reward scores `update 0` 1 (cal is read first); the bank reward scores it 2/3
    fact = run_workflow(ScriptedEngine(tok, lambda text: "update 0"), TinyR1Workflow(tok), [s])
    bank = run_workflow(ScriptedEngine(tok, lambda text: "update 0"), TinyR1Workflow(tok, reward="bank"), [s])
    assert fact.rewards == [1.0] and bank.rewards == [pytest.approx(2 / 3)]
    assert fact.stats["bank_em"] == pytest.approx(2 / 3)
    with pytest.raises(ValueError, match="reward"):
        TinyR1Workflow(tok, reward="all")
